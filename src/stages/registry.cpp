// Every stage of a session's chain, in chain order: one line each.
#include "stages/registry.h"

#include "stages/translation/registration.h"

namespace earshot::stages {

const std::vector<StageDefinition>& registry() {
  static const std::vector<StageDefinition> stages = {
      translation::stage_definition(),
  };
  return stages;
}

}  // namespace earshot::stages
