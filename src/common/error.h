// Typed errors with messages a user can act on. Thrown across part boundaries;
// the server catches them per session so bad input never takes it down.
#pragma once

#include <stdexcept>
#include <string>

namespace earshot {

enum class ErrorCode {
  kInvalidArgument,  // a bad option or parameter from the user or a client
  kInvalidModel,     // a model file that is malformed, truncated or unsupported
  kInvalidAudio,     // audio that cannot be decoded
  kIo,               // a file or network operation failed
  kUnsupported,      // valid input that this build cannot handle
  kInternal,         // a bug: an invariant of earshot itself was broken
};

const char* to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace earshot
