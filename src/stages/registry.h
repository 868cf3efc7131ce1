// The stage registry: every stage of a session's chain (translation,
// diarization...) registers itself here with one line (registry.cpp): its
// name, its command-line options (declared on the commands it serves, read and
// validated by itself) and its loader, which turns the validated settings into
// resources shared by every stream (a model, workers) that open a per-stream
// Stage. serve, transcribe and bench build their option tables and their chains
// from the registry, so a new stage needs no edit in cli/ or server/.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/command_line.h"
#include "model/quantize/quantize.h"
#include "model/registry.h"
#include "model/runtime/model_file.h"
#include "stages/stage.h"

namespace earshot::stages {

// The commands that run stages (common/command_line.h); a stage declares its options on those it serves.
using Command = CommandKind;

// What the command passes every stage's settings besides its own options.
struct CommandContext {
  Command command = Command::kServe;
  double pause_seconds = 5.0;  // the session's pause-segmentation length
  int threads = 1;             // --threads: CPU threads a model pass may use
};

// What one stream asks of the stages.
struct StreamRequest {
  std::string language = "auto";  // the stream's source language ("auto" or a code)
  // The protocol's per-stream parameters a stage reads, under the protocol's names
  // (WhisperLiveKit's target_language, Deepgram's diarize). An absent key means the
  // stream's protocol has no such parameter; each stage documents what that means.
  std::map<std::string, std::string> params;
  // A live stream (serve's WebSocket routes): a stage's model work runs off the
  // session's thread. false for files (transcribe, bench, uploads): a stage may work
  // in order, every draft, since nothing is late.
  bool live = true;
};

// One figure of a stage for serve's /metrics (Prometheus text format).
struct Metric {
  std::string name;  // earshot_<stage>_...
  std::string type;  // "counter" or "gauge"
  std::string help;
  double value = 0;
};

// A stage loaded once, shared by every stream (immutable after load).
class LoadedStage {
 public:
  virtual ~LoadedStage() = default;
  // The stage of one stream; null when the stream does not use it. Throws
  // Error(kInvalidArgument) with a message for a request it cannot serve.
  virtual std::unique_ptr<Stage> open(const StreamRequest& request) const = 0;
  // Its figures now, summed over its streams (how far behind it is...); none by default.
  virtual std::vector<Metric> metrics() const { return {}; }
};

// A stage's options read and validated; loading is a separate step so that every
// stage's options are checked before any model is loaded.
class StageSettings {
 public:
  virtual ~StageSettings() = default;
  virtual std::shared_ptr<const LoadedStage> load() const = 0;
};

struct StageDefinition {
  std::string name;  // what /health lists for a loaded stage ("translation")
  // Declares the stage's options (names, help, defaults) on `command`'s table; none
  // for a command it does not serve.
  std::function<void(Args& args, Command command)> declare;
  // Reads and validates them (Error(kInvalidArgument) naming the option); null when
  // the command line leaves the stage off.
  std::function<std::unique_ptr<StageSettings>(const Args& args, const CommandContext& context)> configure;
  // The models its --NAME-model option takes by name, for `earshot pull` and
  // `earshot models` (the stage resolves the name itself); none when empty.
  std::function<std::vector<models::ModelInfo>()> catalogue;
  // `earshot models`: what a model file of the stage's is (family, layout, the
  // types of its matrices); nullopt for any other file. None: it names no files.
  std::function<std::optional<quantize::FileSummary>(const runtime::ModelFileProbe& file,
                                                     const std::filesystem::path& path)>
      summarize;
};

// Every stage, in chain order: a session runs its events through them in this order.
const std::vector<StageDefinition>& registry();

// The stages one command runs: loaded once, opened per stream.
class StageChain {
 public:
  // Declares the options of every stage in `stages` for `command`.
  static void declare(Args& args, Command command, const std::vector<StageDefinition>& stages = registry());
  // Validates every stage's options first, then loads the stages turned on.
  static StageChain load(const Args& args, const CommandContext& context,
                         const std::vector<StageDefinition>& stages = registry());

  // One stream's chain, in registry order (stages the request does not use left out).
  std::vector<std::unique_ptr<Stage>> open(const StreamRequest& request) const;
  bool empty() const { return loaded_.empty(); }
  std::vector<std::string> names() const;
  // Every loaded stage's figures.
  std::vector<Metric> metrics() const;
  // A loaded stage by name; null when it is off (for a command's own reports).
  const LoadedStage* find(const std::string& name) const;

 private:
  std::vector<std::pair<std::string, std::shared_ptr<const LoadedStage>>> loaded_;
};

}  // namespace earshot::stages
