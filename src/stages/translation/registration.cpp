#include "stages/translation/registration.h"

namespace earshot::stages::translation {

namespace {

// serve names the target as WhisperLiveKit's query does; the file commands say where to.
std::string target_flag(Command command) { return command == Command::kServe ? "target-language" : "translate-to"; }

class Settings : public StageSettings {
 public:
  Settings(TranslationSettings settings, Command command) : settings_(std::move(settings)), command_(command) {}
  std::shared_ptr<const LoadedStage> load() const override {
    return std::make_shared<LoadedTranslation>(load_translation(settings_), command_);
  }

 private:
  TranslationSettings settings_;
  Command command_;
};

void declare(Args& args, Command command) { declare_translation_options(args, target_flag(command)); }

std::unique_ptr<StageSettings> configure(const Args& args, const CommandContext& context) {
  std::optional<TranslationSettings> s =
      parse_translation_options(args, target_flag(context.command), context.pause_seconds);
  if (!s) return nullptr;
  return std::make_unique<Settings>(std::move(*s), context.command);
}

}  // namespace

StageDefinition stage_definition() { return {"translation", declare, configure, translation_catalogue, {}}; }

std::unique_ptr<Stage> LoadedTranslation::open(const StreamRequest& request) const {
  const auto asked = request.params.find("target_language");
  if (command_ != Command::kServe) {
    // A file of transcribe or bench: in order, every draft (no real-time budget to keep).
    TranslationOptions options = setup_.service->defaults();
    if (asked != request.params.end() && !asked->second.empty()) options.target_language = asked->second;
    return setup_.service->make_synchronous_stage(request.language, options);
  }
  if (asked == request.params.end()) return nullptr;
  const std::string& target = asked->second.empty() ? setup_.default_target : asked->second;
  if (target.empty()) return nullptr;
  if (!request.live) {
    TranslationOptions options = setup_.service->defaults();
    options.target_language = target;
    return setup_.service->make_synchronous_stage(request.language, options);
  }
  return setup_.service->make_stage(request.language, target);
}

}  // namespace earshot::stages::translation
