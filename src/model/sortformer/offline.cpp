// frame_probabilities: the whole recording's mel through one graph.
#include <string>

#include "common/error.h"
#include "features/nemo_mel.h"
#include "model/sortformer/graph.h"
#include "model/sortformer/model.h"

namespace earshot::sortformer {

FrameProbabilities frame_probabilities_from_mel(const Model& model, std::span<const float> mel, int n_mel_frames,
                                                const RunOptions& options) {
  detail::Runner runner(model, options);
  return runner.offline(mel, n_mel_frames);
}

FrameProbabilities frame_probabilities(const Model& model, std::span<const float> samples, const RunOptions& options) {
  const fastconformer::Hparams& e = model.hparams().encoder;
  const features::FrameMajorMel mel =
      features::nemo_log_mel(samples, detail::mel_config(e), model.mel_filters(), model.window());
  if (mel.n_frames == 0)
    throw Error(ErrorCode::kInvalidArgument, "frame_probabilities: " + std::to_string(samples.size()) +
                                                 " samples hold no feature frame (one takes " +
                                                 std::to_string(e.hop_length) + ")");
  return frame_probabilities_from_mel(model, mel.data, mel.n_frames, options);
}

}  // namespace earshot::sortformer
