// Every stage of a session's chain, in chain order: one line each.
#include "stages/registry.h"

#include "stages/diarization/registration.h"
#include "stages/diarization/sortformer/sortformer_source.h"
#include "stages/translation/registration.h"
#include "stages/turns/registration.h"

namespace earshot::stages {

const std::vector<StageDefinition>& registry() {
  static const std::vector<StageDefinition> stages = {
      translation::stage_definition(),
      diarization::stage_definition(diarization::sortformer_loader(), diarization::sortformer_catalogue,
                                    diarization::sortformer_file_summary),
      turns::stage_definition(),
  };
  return stages;
}

}  // namespace earshot::stages
