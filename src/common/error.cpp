#include "common/error.h"

namespace earshot {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kInvalidModel: return "invalid model";
    case ErrorCode::kInvalidAudio: return "invalid audio";
    case ErrorCode::kIo: return "i/o error";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kInternal: return "internal error";
  }
  return "error";
}

}  // namespace earshot
