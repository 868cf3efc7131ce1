// The engine boundary: one loaded model of some family, what it can do, and the
// one place where a model is wired to a streaming policy. An Engine is
// immutable once loaded and shared by every thread; open_stream() returns the
// per-stream state (an OnlineProcessor) that one stream owns. serve, transcribe,
// bench and the tests get their processors only through here, so a new family
// (a transducer, Qwen3-ASR) is an addition: a folder engine/NAME/ with an Engine
// subclass and its registration (engine/families.h), one line in families.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/keyterms.h"
#include "common/sample_rate.h"
#include "model/asr_decoder.h"
#include "model/model_pass.h"
#include "model/prompted_asr.h"
#include "model/transducer_stream.h"
#include "policy/online_processor.h"
#include "policy/registry.h"

namespace earshot::engine {

struct Capabilities {
  std::string family;      // "whisper"
  std::string model_name;  // what /health and /v1/models call it ("whisper-tiny.en")
  bool multilingual = false;
  std::vector<std::string> languages;  // codes the model takes ("en", ...)
  double frames_per_second = 50;
  // Streaming policies it runs, the first the default: those registered for the
  // model interface it offers (policy::policy_names<Interface>()).
  std::vector<std::string> policies;
  // A stream may choose how far its text trails the audio (StreamRequest::delay_ms):
  // Voxtral Realtime, trained for a range of delays.
  bool stream_delay = false;
  // Its streams' passes share one context that runs one at a time (Qwen3-ASR's
  // libmtmd encoder): serve's --workers auto then runs one worker on every core.
  bool serial_passes = false;
  // Steps of up to this many streams run as one graph (RuntimeOptions::batch_streams,
  // as the family took it); 0 = every stream's steps alone.
  int batch_streams = 0;
};

struct StreamRequest {
  std::string language = "auto";  // a code, or auto
  std::string policy;             // one of Capabilities::policies; "" = the default
  // The vocabulary to expect: Whisper and Qwen3-ASR take it as prompt text, the
  // transducers boost its phrases while decoding. Empty: the model as it is.
  Keyterms keyterms;
  // How far the stream's text trails its audio, in ms, where the family lets a
  // stream choose (Capabilities::stream_delay; Engine::delay_problem checks it);
  // 0 = the model's setting (--delay-ms).
  int delay_ms = 0;
  PassReport on_pass;                                  // optional: every model pass of this stream, timed
  std::function<void(const std::string&)> on_warning;  // optional: per-pass warnings (loop guards...)
  // Optional: one JSON line per policy pass (AlignAtt's --trace format; a policy without a trace ignores it).
  std::function<void(const std::string&)> on_trace;
  // Optional, for measurement tools only (the bench's reference workload): wraps
  // the stream's decoder (already timed by on_pass) before the policy gets it. A
  // family without an AsrDecoder never calls it (the caller can tell).
  std::function<std::unique_ptr<AsrDecoder>(std::unique_ptr<AsrDecoder>)> wrap_decoder;
  // The same for an audio-LLM family's decoder (model/prompted_asr.h: Qwen3-ASR).
  std::function<std::unique_ptr<PromptedAsrDecoder>(std::unique_ptr<PromptedAsrDecoder>)> wrap_prompted_decoder;
  // Optional, for measurement tools only: a streaming transducer's greedy choices
  // (model/transducer_stream.h); bound when the stream opens. A family or model
  // without a streaming transducer never binds it (the caller can tell).
  std::shared_ptr<TransducerSteer> steer_transducer;
};

// What the request gives its policy (policy/registry.h): its language, keyterms
// and callbacks. The family adds what its model sets (an offline transducer's window).
policy::StreamContext policy_context(const StreamRequest& request);

// Steps that ran batched across streams (a batching engine's, since load).
struct BatchCounts {
  int64_t steps = 0;      // per-stream steps run
  int64_t graphs = 0;     // graphs they ran in (steps / graphs: the mean batch)
  int64_t max_batch = 0;  // the largest batch so far (0: not counted)
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const Capabilities& capabilities() const = 0;

  // A new stream. Throws earshot::Error(kInvalidArgument) with a message for the
  // client for a language or policy the model cannot do.
  virtual std::unique_ptr<OnlineProcessor> open_stream(const StreamRequest& request) const = 0;
  // The engine's cross-stream batching so far; nullopt when it does not batch.
  virtual std::optional<BatchCounts> batch_counts() const { return std::nullopt; }

  // "" when `language` (a code or auto) is one this model takes, else why not.
  std::string language_problem(const std::string& language) const;
  // "" when a stream may ask for `delay_ms` (0: none asked), else why not: the
  // families without a stream delay refuse any (their open_stream ignores it).
  virtual std::string delay_problem(int delay_ms) const;
  // The policy a request names, resolved ("" = the default); throws kInvalidArgument
  // naming the policies there are when the engine has no such one.
  std::string resolve_policy(const std::string& policy) const;
};

}  // namespace earshot::engine
