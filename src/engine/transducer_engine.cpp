#include "engine/transducer_engine.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "features/nemo_mel.h"
#include "model/fastconformer/encoder.h"
#include "model/runtime/device.h"
#include "model/transducer/decoder.h"

namespace earshot::engine {
namespace {

constexpr int kSampleRate = 16000;
constexpr double kLongPause = 5.0;  // the contract's reset threshold (online_processor.h)

class TransducerProcessor : public OnlineProcessor {
 public:
  TransducerProcessor(std::shared_ptr<const fastconformer::Model> model, const ModelSpec& spec,
                      const StreamRequest& request)
      : model_(std::move(model)),
        backend_(runtime::create_backend(model_->device(), spec.runtime.threads)),
        encoder_(model_, backend_.get()),
        decoder_(&model_->decoder_weights()),
        state_(decoder_.initial_state()),
        window_samples_(static_cast<size_t>(spec.transducer.window_seconds * kSampleRate)),
        language_(request.language == "auto" ? "" : request.language) {
    const fastconformer::Hparams& hp = model_->hparams();
    mel_config_.n_fft = hp.n_fft, mel_config_.hop_length = hp.hop_length, mel_config_.n_mels = hp.n_mels;
    mel_config_.preemph = hp.preemph, mel_config_.log_guard = hp.log_guard;
    mel_config_.normalize_per_feature = hp.feature_norm == fastconformer::FeatureNorm::kPerFeature;
    frame_seconds_ = static_cast<double>(hp.hop_length * hp.subsampling_factor) / kSampleRate;
  }

  void insert_audio(std::span<const float> samples, double stream_end_time) override {
    if (samples_.empty()) buffer_start_ = stream_end_time - static_cast<double>(samples.size()) / kSampleRate;
    samples_.insert(samples_.end(), samples.begin(), samples.end());
  }

  ProcessResult process(bool is_last) override {
    ProcessResult result;
    while (samples_.size() >= window_samples_ || (is_last && !samples_.empty())) {
      const size_t n = std::min(samples_.size(), window_samples_);
      run_window(std::span<const float>(samples_.data(), n), result.committed);
      samples_.erase(samples_.begin(), samples_.begin() + static_cast<std::ptrdiff_t>(n));
      buffer_start_ += static_cast<double>(n) / kSampleRate;
    }
    if (is_last && !pending_.text.empty()) commit(result.committed);
    result.processed_until = buffer_start_;
    return result;
  }

  std::vector<Word> provisional() const override {
    if (pending_.text.empty()) return {};
    return {pending_};
  }
  std::vector<Word> hypothesis() const override {
    std::vector<Word> all = committed_;
    if (!pending_.text.empty()) all.push_back(pending_);
    return all;
  }

  ProcessResult start_silence() override { return process(true); }
  void end_silence(double duration, double /*offset*/) override {
    // The buffer is empty after start_silence's flush: the next insert_audio sets
    // the time. A long pause starts the prediction network afresh.
    if (duration >= kLongPause) state_ = decoder_.initial_state();
  }
  void new_speaker(int speaker) override { speaker_ = speaker; }
  ProcessResult finish() override { return process(true); }
  void warmup() override {
    const std::vector<float> silence(kSampleRate, 0.0f);
    const features::FrameMajorMel mel =
        features::nemo_log_mel(silence, mel_config_, model_->mel_filters(), model_->window());
    encoder_.encode(mel.data, mel.n_frames);
  }
  std::string language() const override { return language_; }

 private:
  void commit(std::vector<Word>& committed) {
    committed.push_back(pending_);
    committed_.push_back(pending_);
    pending_ = Word{};
  }

  void run_window(std::span<const float> audio, std::vector<Word>& committed) {
    const features::FrameMajorMel mel =
        features::nemo_log_mel(audio, mel_config_, model_->mel_filters(), model_->window());
    const fastconformer::EncoderOutput enc = encoder_.encode(mel.data, mel.n_frames);
    std::vector<transducer::Emission> emissions;
    decoder_.greedy(decoder_.project_encoder(enc.data, enc.n_frames), enc.n_frames, state_, emissions);
    const std::vector<std::string>& pieces = model_->pieces();
    for (const transducer::Emission& e : emissions) {
      const std::string& piece = pieces.at(e.token);
      // A piece with the word marker starts a word (and commits the one before);
      // any other continues it. The very first word has no leading space.
      if (transducer::piece_starts_word(piece) && !pending_.text.empty()) commit(committed);
      const std::string text = transducer::piece_text(piece, committed_.empty() && pending_.text.empty());
      if (text.empty()) continue;
      const double start = buffer_start_ + e.frame * frame_seconds_;
      const double end = buffer_start_ + (e.frame + std::max(e.duration, 1)) * frame_seconds_;
      if (pending_.text.empty()) {
        pending_.text = text;
        pending_.start = start;
        pending_.probability = 1.0f;
        pending_.language = language_;
        pending_.speaker = speaker_;
      } else {
        pending_.text += text;
      }
      pending_.end = std::max(pending_.end, end);
      pending_.probability *= std::exp(e.token_log_prob);
    }
  }

  std::shared_ptr<const fastconformer::Model> model_;
  ggml_backend_ptr backend_;
  fastconformer::Encoder encoder_;
  transducer::Decoder decoder_;
  transducer::DecoderState state_;
  features::NemoMelConfig mel_config_;
  size_t window_samples_;
  double frame_seconds_ = 0.08;
  std::vector<float> samples_;
  double buffer_start_ = 0;
  Word pending_;
  std::vector<Word> committed_;
  std::string language_;
  int speaker_ = -1;
};

}  // namespace

TransducerEngine::TransducerEngine(std::shared_ptr<const fastconformer::Model> model, const ModelSpec& spec)
    : model_(std::move(model)), spec_(spec) {
  if (spec.runtime.threads < 1) throw Error(ErrorCode::kInvalidArgument, "--threads must be >= 1");
  if (!(spec.transducer.window_seconds >= 1 && spec.transducer.window_seconds <= 120))
    throw Error(ErrorCode::kInvalidArgument, "the transducer window must be 1 to 120 s");
  capabilities_.family = "transducer";
  capabilities_.model_name = spec.path.stem().string();
  if (capabilities_.model_name.starts_with("ggml-")) capabilities_.model_name.erase(0, 5);
  // Parakeet-TDT v3 transcribes 25 European languages without being told which:
  // a code only labels the words.
  capabilities_.multilingual = true;
  capabilities_.languages = {"bg", "hr", "cs", "da", "nl", "en", "et", "fi", "fr", "de", "el", "hu", "it",
                             "lv", "lt", "mt", "pl", "pt", "ro", "sk", "sl", "es", "sv", "ru", "uk"};
  capabilities_.native_timestamps = true;
  capabilities_.needs_commit_policy = false;
  const fastconformer::Hparams& hp = model_->hparams();
  capabilities_.frames_per_second = static_cast<double>(hp.sample_rate) / (hp.hop_length * hp.subsampling_factor);
  capabilities_.policies = {"native"};
}

std::unique_ptr<OnlineProcessor> TransducerEngine::open_stream(const StreamRequest& request) const {
  resolve_policy(request.policy);
  return std::make_unique<TransducerProcessor>(model_, spec_, request);
}

std::shared_ptr<const Engine> load_transducer_engine(const ModelSpec& spec) {
  ggml_backend_dev_t device = runtime::resolve_device(spec.runtime.device);
  return std::make_shared<TransducerEngine>(fastconformer::Model::load(spec.path, device), spec);
}

}  // namespace earshot::engine
