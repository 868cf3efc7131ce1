#include "stages/turns/registration.h"

#include <cmath>

#include "common/error.h"
#include "model/llm/llama_backend.h"

namespace earshot::stages::turns {

namespace {

struct Settings {
  TurnSettings defaults;
  std::string model;
  ScorerPrompt prompt;
  int threads = 1;
};

class ReadSettings : public StageSettings {
 public:
  explicit ReadSettings(Settings s) : s_(std::move(s)) {}
  std::shared_ptr<const LoadedStage> load() const override {
    std::shared_ptr<const SemanticTurnModel> semantic;
    if (!s_.model.empty()) {
      llm::LlamaModelOptions options;
      options.threads = s_.threads;
      std::shared_ptr<const llm::LlamaModel> model;
      try {
        model = llm::LlamaModel::load(s_.model, options);
      } catch (const Error& e) {
        throw Error(e.code(), "--turn-model " + s_.model + ": " + e.what());
      }
      semantic = std::make_shared<SemanticTurnModel>(model, s_.prompt, s_.threads);
    }
    return std::make_shared<LoadedTurns>(s_.defaults, std::move(semantic));
  }

 private:
  Settings s_;
};

void declare(Args& args, Command command) {
  if (command == Command::kTranscribe) return;
  args.option("turn-detection",
              "turn events for voice agents (start, eager end, resumed, end of a speaker's turn): on|off; Deepgram "
              "Flux's /v2/listen needs them",
              "on")
      .option("eot-threshold", "turns: confidence that ends a turn, 0.5..1.0 (1.0: only timeouts and flushes)", "0.7")
      .option("eager-eot-threshold", "turns: confidence of an eager end (TurnEndLikely), 0.3..0.9; empty: off", "")
      .option("eot-timeout-ms", "turns: silence that ends a turn whatever the confidence, 500..60000", "5000")
      .option("turn-model",
              "turns: a semantic end-of-turn model (a small chat GGUF libllama loads) scoring each turn's text; "
              "empty: the text's shape only",
              "")
      .option("turn-model-prompt", "turns: the model's prompt, {text} for the turn's text (\\n: a newline)",
              "<|im_start|>user\\n{text}")
      .option("turn-model-end-token", "turns: the token whose probability after the prompt is the score", "<|im_end|>");
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

double ranged(const Args& args, const char* name, double lo, double hi) {
  const std::string text = args.get(name);
  double v = NAN;
  try {
    size_t used = 0;
    v = std::stod(text, &used);
    if (used != text.size()) v = NAN;
  } catch (const std::exception&) {
  }
  if (!(v >= lo && v <= hi)) {
    char range[64];
    std::snprintf(range, sizeof range, "%g..%g", lo, hi);
    throw Error(ErrorCode::kInvalidArgument, std::string("--") + name + " must be a number in " + range);
  }
  return v;
}

std::unique_ptr<StageSettings> configure(const Args& args, const CommandContext& context) {
  if (context.command == Command::kTranscribe) return nullptr;
  const std::string on = args.get("turn-detection");
  if (on != "on" && on != "off") throw Error(ErrorCode::kInvalidArgument, "--turn-detection must be on or off");
  Settings s;
  s.defaults.eot_threshold = ranged(args, "eot-threshold", 0.5, 1.0);
  s.defaults.timeout_seconds = ranged(args, "eot-timeout-ms", 500, 60000) / 1000;
  if (!args.get("eager-eot-threshold").empty()) {
    s.defaults.eager_eot_threshold = ranged(args, "eager-eot-threshold", 0.3, 0.9);
    if (*s.defaults.eager_eot_threshold > s.defaults.eot_threshold)
      throw Error(ErrorCode::kInvalidArgument, "--eager-eot-threshold must not be above --eot-threshold");
  }
  s.model = args.get("turn-model");
  s.prompt = parse_scorer_prompt(unescape(args.get("turn-model-prompt")), args.get("turn-model-end-token"));
  s.threads = std::max(1, context.threads);
  if (on == "off") {
    for (const char* option : {"eot-threshold", "eager-eot-threshold", "eot-timeout-ms", "turn-model",
                               "turn-model-prompt", "turn-model-end-token"})
      if (args.has(option))
        throw Error(ErrorCode::kInvalidArgument, std::string("--") + option + " needs --turn-detection on");
    return nullptr;
  }
  return std::make_unique<ReadSettings>(std::move(s));
}

}  // namespace

StageDefinition stage_definition() { return {"turns", declare, configure, {}, {}}; }

LoadedTurns::LoadedTurns(TurnSettings defaults, std::shared_ptr<const SemanticTurnModel> semantic)
    : defaults_(defaults), semantic_(std::move(semantic)) {}

std::unique_ptr<Stage> LoadedTurns::open(const StreamRequest& request) const {
  std::optional<TurnSettings> settings = settings_for(request.params, defaults_);
  if (!settings) return nullptr;
  return std::make_unique<TurnStage>(*settings, semantic_ ? open_scorer(semantic_) : nullptr, defaults_);
}

std::vector<Metric> LoadedTurns::metrics() const { return {}; }

}  // namespace earshot::stages::turns
