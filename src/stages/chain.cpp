#include "stages/registry.h"

namespace earshot::stages {

void StageChain::declare(Args& args, Command command, const std::vector<StageDefinition>& stages) {
  for (const StageDefinition& d : stages)
    if (d.declare) d.declare(args, command);
}

StageChain StageChain::load(const Args& args, const CommandContext& context,
                            const std::vector<StageDefinition>& stages) {
  std::vector<std::pair<std::string, std::unique_ptr<StageSettings>>> settings;
  for (const StageDefinition& d : stages)
    if (d.configure)
      if (std::unique_ptr<StageSettings> s = d.configure(args, context)) settings.emplace_back(d.name, std::move(s));
  StageChain chain;
  for (auto& [name, s] : settings) chain.loaded_.emplace_back(name, s->load());
  return chain;
}

std::vector<std::unique_ptr<Stage>> StageChain::open(const StreamRequest& request) const {
  std::vector<std::unique_ptr<Stage>> out;
  for (const auto& [name, stage] : loaded_)
    if (std::unique_ptr<Stage> s = stage->open(request)) out.push_back(std::move(s));
  return out;
}

std::vector<std::string> StageChain::names() const {
  std::vector<std::string> out;
  for (const auto& entry : loaded_) out.push_back(entry.first);
  return out;
}

std::vector<Metric> StageChain::metrics() const {
  std::vector<Metric> out;
  for (const auto& entry : loaded_) {
    std::vector<Metric> m = entry.second->metrics();
    out.insert(out.end(), m.begin(), m.end());
  }
  return out;
}

const LoadedStage* StageChain::find(const std::string& name) const {
  for (const auto& [n, stage] : loaded_)
    if (n == name) return stage.get();
  return nullptr;
}

}  // namespace earshot::stages
