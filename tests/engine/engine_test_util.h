// Engines over generated random-weight Whisper models, loaded the way every
// command loads a model: engine::load on a file.
#pragma once

#include <memory>
#include <string>

#include "../model/model_test_util.h"
#include "engine/families.h"

namespace earshot::engine::testing {

// Writes `model` to a temporary file and loads it through engine::load with `spec`'s settings.
inline std::shared_ptr<const Engine> load_random_engine(const whisper::RandomModelSpec& model, const std::string& tag,
                                                        ModelSpec spec = {}) {
  whisper::testing::TempDir dir(tag);
  spec.path = dir / "model.bin";
  whisper::write_random_model(model, spec.path);
  return load(spec);
}

}  // namespace earshot::engine::testing
