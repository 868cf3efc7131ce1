#include "engine/transducer_engine.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "features/nemo_mel.h"
#include "features/nemo_mel_stream.h"
#include "model/fastconformer/encoder.h"
#include "model/fastconformer/streaming_encoder.h"
#include "model/runtime/device.h"
#include "model/transducer/decoder.h"

namespace earshot::engine {
namespace {

constexpr int kSampleRate = 16000;
constexpr double kLongPause = 5.0;  // the contract's reset threshold (online_processor.h)

// What both transducer processors share: pieces become words with frame times
// (a piece with the word marker starts a word and commits the one before),
// append-only; the prediction network's state across windows or chunks.
class TransducerWords : public OnlineProcessor {
 public:
  TransducerWords(std::shared_ptr<const fastconformer::Model> model, const StreamRequest& request)
      : model_(std::move(model)),
        decoder_(&model_->decoder_weights()),
        state_(decoder_.initial_state()),
        language_(request.language == "auto" ? "" : request.language) {
    const fastconformer::Hparams& hp = model_->hparams();
    // A prompt model is told the language through its one-hot (auto: the auto slot).
    if (hp.n_prompts > 0) prompt_slot_ = fastconformer::prompt_slot(hp, request.language);
    mel_config_.n_fft = hp.n_fft, mel_config_.hop_length = hp.hop_length, mel_config_.n_mels = hp.n_mels;
    mel_config_.preemph = hp.preemph, mel_config_.log_guard = hp.log_guard;
    mel_config_.normalize_per_feature = hp.feature_norm == fastconformer::FeatureNorm::kPerFeature;
    frame_seconds_ = static_cast<double>(hp.hop_length * hp.subsampling_factor) / kSampleRate;
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
  void end_silence(double duration, double /*offset*/) override {
    // The buffer is empty after start_silence's flush: the next insert_audio sets
    // the time. A long pause starts the prediction network afresh.
    if (duration >= kLongPause) state_ = decoder_.initial_state();
  }
  void new_speaker(int speaker) override { speaker_ = speaker; }
  std::string language() const override { return language_; }

 protected:
  void commit(std::vector<Word>& committed) {
    committed.push_back(pending_);
    committed_.push_back(pending_);
    pending_ = Word{};
  }
  void flush(std::vector<Word>& committed) {
    if (!pending_.text.empty()) commit(committed);
  }

  // Decodes encoder frames (enc.first_frame on) whose frame 0 is at time_origin.
  void decode(const fastconformer::EncoderOutput& enc, double time_origin, std::vector<Word>& committed) {
    if (enc.n_frames == 0) return;
    std::vector<transducer::Emission> emissions;
    const std::vector<float> joint_input =
        prompt_slot_ >= 0 ? decoder_.apply_prompt(enc.data, enc.n_frames, prompt_slot_) : std::vector<float>{};
    decoder_.greedy(decoder_.project_encoder(prompt_slot_ >= 0 ? joint_input : enc.data, enc.n_frames), enc.n_frames,
                    state_, emissions, enc.first_frame);
    const std::vector<std::string>& pieces = model_->pieces();
    for (const transducer::Emission& e : emissions) {
      const std::string& piece = pieces.at(e.token);
      // A language tag (Nemotron 3.5: "<de-DE>") is not a word: it sets the
      // language of the word in progress and of those after it (committed words
      // are final, so they keep theirs). "<auto>" says nothing.
      if (const std::string tag = transducer::language_tag(piece); !tag.empty()) {
        if (tag != "auto") {
          language_ = tag.substr(0, tag.find('-'));
          if (!pending_.text.empty()) pending_.language = language_;
        }
        continue;
      }
      // A piece with the word marker starts a word (and commits the one before);
      // any other continues it. The very first word has no leading space.
      if (transducer::piece_starts_word(piece) && !pending_.text.empty()) commit(committed);
      const std::string text = transducer::piece_text(piece, committed_.empty() && pending_.text.empty());
      if (text.empty()) continue;
      const double start = time_origin + e.frame * frame_seconds_;
      const double end = time_origin + (e.frame + std::max(e.duration, 1)) * frame_seconds_;
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
  transducer::Decoder decoder_;
  transducer::DecoderState state_;
  features::NemoMelConfig mel_config_;
  double frame_seconds_ = 0.08;
  Word pending_;
  std::vector<Word> committed_;
  std::string language_;
  int speaker_ = -1;
  int prompt_slot_ = -1;  // a prompt model's one-hot slot; -1: no prompt kernel
};

// An offline model (Parakeet-TDT): windows of window_seconds, features normalised per window.
class TransducerProcessor : public TransducerWords {
 public:
  TransducerProcessor(std::shared_ptr<const fastconformer::Model> model, const ModelSpec& spec,
                      const StreamRequest& request)
      : TransducerWords(std::move(model), request),
        backend_(runtime::create_backend(model_->device(), spec.runtime.threads)),
        encoder_(model_, backend_.get()),
        window_samples_(static_cast<size_t>(spec.transducer.window_seconds * kSampleRate)) {}

  void insert_audio(std::span<const float> samples, double stream_end_time) override {
    if (samples_.empty()) buffer_start_ = stream_end_time - static_cast<double>(samples.size()) / kSampleRate;
    samples_.insert(samples_.end(), samples.begin(), samples.end());
  }

  ProcessResult process(bool is_last) override {
    ProcessResult result;
    while (samples_.size() >= window_samples_ || (is_last && !samples_.empty())) {
      const size_t n = std::min(samples_.size(), window_samples_);
      const features::FrameMajorMel mel = features::nemo_log_mel(std::span<const float>(samples_.data(), n),
                                                                 mel_config_, model_->mel_filters(), model_->window());
      decode(encoder_.encode(mel.data, mel.n_frames), buffer_start_, result.committed);
      samples_.erase(samples_.begin(), samples_.begin() + static_cast<std::ptrdiff_t>(n));
      buffer_start_ += static_cast<double>(n) / kSampleRate;
    }
    if (is_last) flush(result.committed);
    result.processed_until = buffer_start_;
    return result;
  }

  ProcessResult start_silence() override { return process(true); }
  ProcessResult finish() override { return process(true); }
  void warmup() override {
    const std::vector<float> silence(kSampleRate, 0.0f);
    const features::FrameMajorMel mel =
        features::nemo_log_mel(silence, mel_config_, model_->mel_filters(), model_->window());
    encoder_.encode(mel.data, mel.n_frames);
  }

 private:
  ggml_backend_ptr backend_;
  fastconformer::Encoder encoder_;
  size_t window_samples_;
  std::vector<float> samples_;
  double buffer_start_ = 0;
};

// A cache-aware streaming model (Nemotron streaming): the streaming mel and
// encoder; each chunk of right + 1 frames is encoded and decoded as soon as its
// audio is in. A segment (up to a VAD pause or the end) is one encoder stream:
// its frame 0 is at the segment's first sample.
class StreamingTransducerProcessor : public TransducerWords {
 public:
  StreamingTransducerProcessor(std::shared_ptr<const fastconformer::Model> model, const ModelSpec& spec,
                               const StreamRequest& request, int right_context)
      : TransducerWords(std::move(model), request),
        backend_(runtime::create_backend(model_->device(), spec.runtime.threads)),
        encoder_(model_, backend_.get(), {.right_context = right_context}),
        mel_(mel_config_, model_->mel_filters(), model_->window()) {}

  void insert_audio(std::span<const float> samples, double stream_end_time) override {
    if (segment_samples_ == 0 && samples_.empty())
      segment_start_ = stream_end_time - static_cast<double>(samples.size()) / kSampleRate;
    samples_.insert(samples_.end(), samples.begin(), samples.end());
  }

  ProcessResult process(bool is_last) override {
    ProcessResult result;
    if (!samples_.empty()) {
      const features::FrameMajorMel mel = mel_.push(samples_);
      segment_samples_ += static_cast<long long>(samples_.size());
      samples_.clear();
      decode(encoder_.push(mel.data, mel.n_frames), segment_start_, result.committed);
    }
    if (is_last && segment_samples_ > 0) {
      const features::FrameMajorMel rest = mel_.finish();
      decode(encoder_.push(rest.data, rest.n_frames), segment_start_, result.committed);
      decode(encoder_.finish(), segment_start_, result.committed);
      segment_start_ += static_cast<double>(segment_samples_) / kSampleRate;
      segment_samples_ = 0;
      done_frames_ = 0;
    } else {
      done_frames_ = encoder_.frames_done();
    }
    if (is_last) flush(result.committed);
    result.processed_until = segment_start_ + done_frames_ * frame_seconds_;
    return result;
  }

  ProcessResult start_silence() override { return process(true); }
  ProcessResult finish() override { return process(true); }
  void warmup() override {
    // A throwaway encoder: this stream's caches stay untouched.
    fastconformer::StreamingEncoder encoder(model_, backend_.get(), {.right_context = encoder_.right_context()});
    features::NemoMelStream mel(mel_config_, model_->mel_filters(), model_->window());
    const std::vector<float> silence(kSampleRate, 0.0f);
    const features::FrameMajorMel m = mel.push(silence);
    encoder.push(m.data, m.n_frames);
  }

 private:
  ggml_backend_ptr backend_;
  fastconformer::StreamingEncoder encoder_;
  features::NemoMelStream mel_;
  std::vector<float> samples_;
  double segment_start_ = 0;
  long long segment_samples_ = 0;
  int done_frames_ = 0;
};

}  // namespace

TransducerEngine::TransducerEngine(std::shared_ptr<const fastconformer::Model> model, const ModelSpec& spec)
    : model_(std::move(model)), spec_(spec) {
  if (spec.runtime.threads < 1) throw Error(ErrorCode::kInvalidArgument, "--threads must be >= 1");
  if (!(spec.transducer.window_seconds >= 1 && spec.transducer.window_seconds <= 120))
    throw Error(ErrorCode::kInvalidArgument, "the transducer window must be 1 to 120 s");
  const fastconformer::Hparams& hp = model_->hparams();
  const int frame_ms = 1000 * hp.hop_length * hp.subsampling_factor / hp.sample_rate;
  if (hp.streaming()) {
    right_context_ = hp.att_right;
    if (spec.transducer.lookahead_ms != 0) {
      if (spec.transducer.lookahead_ms % frame_ms != 0)
        throw Error(ErrorCode::kInvalidArgument, "--lookahead-ms " + std::to_string(spec.transducer.lookahead_ms) +
                                                     " is not a whole number of " + std::to_string(frame_ms) +
                                                     " ms encoder frames");
      right_context_ = spec.transducer.lookahead_ms / frame_ms - 1;
    }
    fastconformer::check_streaming(hp, right_context_,
                                   "--lookahead-ms " + std::to_string(spec.transducer.lookahead_ms));
  } else if (spec.transducer.lookahead_ms != 0) {
    throw Error(ErrorCode::kInvalidArgument, "--lookahead-ms applies to cache-aware streaming transducers; " +
                                                 spec.path.filename().string() + " is an offline model");
  }
  capabilities_.family = "transducer";
  capabilities_.model_name = spec.path.stem().string();
  if (capabilities_.model_name.starts_with("ggml-")) capabilities_.model_name.erase(0, 5);
  // Parakeet-TDT v3 transcribes 25 European languages without being told which:
  // a code only labels the words.
  capabilities_.multilingual = true;
  capabilities_.languages = {"bg", "hr", "cs", "da", "nl", "en", "et", "fi", "fr", "de", "el", "hu", "it",
                             "lv", "lt", "mt", "pl", "pt", "ro", "sk", "sl", "es", "sv", "ru", "uk"};
  if (hp.n_prompts > 0) {
    // Nemotron 3.5: the languages of its prompt dictionary, each locale and its bare code.
    capabilities_.multilingual = true;
    capabilities_.languages = fastconformer::prompt_languages(hp);
  } else if (right_context_ >= 0) {
    // nemotron-speech-streaming-en: English only.
    capabilities_.multilingual = false;
    capabilities_.languages = {"en"};
  }
  capabilities_.native_timestamps = true;
  capabilities_.needs_commit_policy = false;
  capabilities_.frames_per_second = static_cast<double>(hp.sample_rate) / (hp.hop_length * hp.subsampling_factor);
  capabilities_.policies = {"native"};
}

std::unique_ptr<OnlineProcessor> TransducerEngine::open_stream(const StreamRequest& request) const {
  resolve_policy(request.policy);
  if (right_context_ >= 0)
    return std::make_unique<StreamingTransducerProcessor>(model_, spec_, request, right_context_);
  return std::make_unique<TransducerProcessor>(model_, spec_, request);
}

std::shared_ptr<const Engine> load_transducer_engine(const ModelSpec& spec) {
  ggml_backend_dev_t device = runtime::resolve_device(spec.runtime.device);
  return std::make_shared<TransducerEngine>(fastconformer::Model::load(spec.path, device), spec);
}

}  // namespace earshot::engine
