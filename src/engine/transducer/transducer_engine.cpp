#include "engine/transducer/transducer_engine.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/sample_rate.h"
#include "features/nemo_mel.h"
#include "features/nemo_mel_stream.h"
#include "model/fastconformer/encoder.h"
#include "model/fastconformer/streaming_encoder.h"
#include "model/runtime/device.h"
#include "model/transducer/decoder.h"
#include "policy/commit/revising_processor.h"

namespace earshot::engine {
namespace {

constexpr double kLongPause = 5.0;  // the contract's reset threshold (online_processor.h)

// Pieces become words with frame times: a piece with the word marker starts a
// word (and completes the one before), any other continues it; a language tag
// sets the language instead. What every transducer path shares.
struct WordAssembler {
  const std::vector<std::string>* pieces = nullptr;
  double frame_seconds = 0.08;
  std::string language;
  int speaker = -1;
  bool stream_has_words = false;  // the very first word of a stream has no leading space
  Word pending;                   // the word in progress

  // Emissions of frames whose frame 0 is at time_origin; completed words go to `out`.
  void add(const std::vector<transducer::Emission>& emissions, double time_origin, std::vector<Word>& out) {
    for (const transducer::Emission& e : emissions) {
      const std::string& piece = pieces->at(e.token);
      // A language tag (Nemotron 3.5: "<de-DE>") is not a word: it sets the
      // language of the word in progress and of those after it (completed words
      // keep theirs). "<auto>" says nothing.
      if (const std::string tag = transducer::language_tag(piece); !tag.empty()) {
        if (tag != "auto") {
          language = tag.substr(0, tag.find('-'));
          if (!pending.text.empty()) pending.language = language;
        }
        continue;
      }
      if (transducer::piece_starts_word(piece) && !pending.text.empty()) flush(out);
      const std::string text = transducer::piece_text(piece, !stream_has_words && pending.text.empty());
      if (text.empty()) continue;
      const double start = time_origin + e.frame * frame_seconds;
      const double end = time_origin + (e.frame + std::max(e.duration, 1)) * frame_seconds;
      if (pending.text.empty()) {
        pending.text = text;
        pending.start = start;
        pending.probability = 1.0f;
        pending.language = language;
        pending.speaker = speaker;
        stream_has_words = true;
      } else {
        pending.text += text;
      }
      pending.end = std::max(pending.end, end);
      pending.probability *= std::exp(e.token_log_prob);
    }
  }
  void flush(std::vector<Word>& out) {
    if (pending.text.empty()) return;
    out.push_back(std::move(pending));
    pending = Word{};
  }
};

// The model's featuriser settings and the first-word rules, as every path starts them.
struct TransducerSetup {
  features::NemoMelConfig mel;
  WordAssembler words;
  int prompt_slot = -1;  // a prompt model's one-hot slot; -1: no prompt kernel

  TransducerSetup(const fastconformer::Model& model, const StreamRequest& request) {
    const fastconformer::Hparams& hp = model.hparams();
    // A prompt model is told the language through its one-hot (auto: the auto slot).
    if (hp.n_prompts > 0) prompt_slot = fastconformer::prompt_slot(hp, request.language);
    mel.n_fft = hp.n_fft, mel.hop_length = hp.hop_length, mel.n_mels = hp.n_mels;
    mel.preemph = hp.preemph, mel.log_guard = hp.log_guard;
    mel.normalize_per_feature = hp.feature_norm == fastconformer::FeatureNorm::kPerFeature;
    words.pieces = &model.pieces();
    words.frame_seconds = static_cast<double>(hp.hop_length * hp.subsampling_factor) / kSampleRate;
    words.language = request.language == "auto" ? "" : request.language;
  }
};

// Greedy decoding of encoder frames (the prompt kernel first, for a prompt model) from `state`.
std::vector<transducer::Emission> greedy_emissions(const transducer::Decoder& decoder,
                                                   const fastconformer::EncoderOutput& enc, int prompt_slot,
                                                   transducer::DecoderState& state) {
  std::vector<transducer::Emission> emissions;
  if (enc.n_frames == 0) return emissions;
  const std::vector<float> joint_input =
      prompt_slot >= 0 ? decoder.apply_prompt(enc.data, enc.n_frames, prompt_slot) : std::vector<float>{};
  decoder.greedy(decoder.project_encoder(prompt_slot >= 0 ? joint_input : enc.data, enc.n_frames), enc.n_frames, state,
                 emissions, enc.first_frame);
  return emissions;
}

// An offline encoder pass over 16 kHz audio: NeMo's features (normalised over
// this audio when the model says so), then the encoder.
// The offline encoder's settings from the spec: its products' kernels.
fastconformer::EncoderOptions offline_encoder_options(const ModelSpec& spec) {
  fastconformer::EncoderOptions options;
  options.cpu_kernels = spec.runtime.cpu_kernels;
  return options;
}

fastconformer::EncoderOutput encode_audio(const fastconformer::Model& model, const features::NemoMelConfig& mel_config,
                                          fastconformer::Encoder& encoder, std::span<const float> audio) {
  const features::FrameMajorMel mel = features::nemo_log_mel(audio, mel_config, model.mel_filters(), model.window());
  return encoder.encode(mel.data, mel.n_frames);
}

// What the append-only transducer processors share: a word is committed as soon
// as the next one starts; the prediction network's state runs across windows or chunks.
class TransducerWords : public OnlineProcessor {
 public:
  TransducerWords(std::shared_ptr<const fastconformer::Model> model, const StreamRequest& request)
      : model_(std::move(model)),
        decoder_(&model_->decoder_weights()),
        state_(decoder_.initial_state()),
        setup_(*model_, request) {}

  std::vector<Word> provisional() const override {
    if (words().pending.text.empty()) return {};
    return {words().pending};
  }
  std::vector<Word> hypothesis() const override {
    std::vector<Word> all = committed_;
    if (!words().pending.text.empty()) all.push_back(words().pending);
    return all;
  }
  void end_silence(double duration, double /*offset*/) override {
    // The buffer is empty after start_silence's flush: the next insert_audio sets
    // the time. A long pause starts the prediction network afresh.
    if (duration >= kLongPause) state_ = decoder_.initial_state();
  }
  void new_speaker(int speaker) override { setup_.words.speaker = speaker; }
  std::string language() const override { return words().language; }

 protected:
  const WordAssembler& words() const { return setup_.words; }
  const features::NemoMelConfig& mel_config() const { return setup_.mel; }
  double frame_seconds() const { return setup_.words.frame_seconds; }

  void flush(std::vector<Word>& committed) {
    const size_t before = committed.size();
    setup_.words.flush(committed);
    keep_committed(committed, before);
  }

  // Decodes encoder frames (enc.first_frame on) whose frame 0 is at time_origin.
  void decode(const fastconformer::EncoderOutput& enc, double time_origin, std::vector<Word>& committed) {
    const size_t before = committed.size();
    setup_.words.add(greedy_emissions(decoder_, enc, setup_.prompt_slot, state_), time_origin, committed);
    keep_committed(committed, before);
  }
  // The stream's history gets the words appended to `committed` from index `from` on.
  void keep_committed(const std::vector<Word>& committed, size_t from) {
    committed_.insert(committed_.end(), committed.begin() + static_cast<std::ptrdiff_t>(from), committed.end());
  }

  std::shared_ptr<const fastconformer::Model> model_;
  transducer::Decoder decoder_;
  transducer::DecoderState state_;
  TransducerSetup setup_;
  std::vector<Word> committed_;
};

// An offline model (Parakeet-TDT): windows of window_seconds, features normalised per window.
class TransducerProcessor : public TransducerWords {
 public:
  TransducerProcessor(std::shared_ptr<const fastconformer::Model> model, const ModelSpec& spec,
                      const StreamRequest& request)
      : TransducerWords(std::move(model), request),
        backend_(runtime::create_backend(model_->device(), spec.runtime.threads)),
        encoder_(model_, backend_.get(), offline_encoder_options(spec)),
        window_samples_(static_cast<size_t>(spec.options<TransducerOptions>().window_seconds * kSampleRate)) {}

  void insert_audio(std::span<const float> samples, double stream_end_time) override {
    if (samples_.empty()) buffer_start_ = stream_end_time - static_cast<double>(samples.size()) / kSampleRate;
    samples_.insert(samples_.end(), samples.begin(), samples.end());
  }

  ProcessResult process(bool is_last) override {
    ProcessResult result;
    while (samples_.size() >= window_samples_ || (is_last && !samples_.empty())) {
      const size_t n = std::min(samples_.size(), window_samples_);
      decode(encode_audio(*model_, mel_config(), encoder_, std::span<const float>(samples_.data(), n)), buffer_start_,
             result.committed);
      samples_.erase(samples_.begin(), samples_.begin() + static_cast<std::ptrdiff_t>(n));
      buffer_start_ += static_cast<double>(n) / kSampleRate;
    }
    if (is_last) flush(result.committed);
    result.processed_until = buffer_start_;
    return result;
  }

  ProcessResult start_silence() override { return process(true); }
  ProcessResult finish() override { return process(true); }
  void warmup() override { encode_audio(*model_, mel_config(), encoder_, std::vector<float>(kSampleRate, 0.0f)); }

 private:
  ggml_backend_ptr backend_;
  fastconformer::Encoder encoder_;
  size_t window_samples_;
  std::vector<float> samples_;
  double buffer_start_ = 0;
};

// An offline model's rolling passes (--policy rolling, behind
// policy::commit::RevisingProcessor): every pass encodes the whole segment, its
// features normalised over it as the model expects, and decodes it greedily
// from the prediction network's state at the segment's start. The words keep
// their frame times, so committed words keep native times; the final pass's
// state and language carry into the next segment (a long pause resets them).
class TransducerWindowDecoder : public policy::commit::WindowDecoder {
 public:
  TransducerWindowDecoder(std::shared_ptr<const fastconformer::Model> model, const ModelSpec& spec,
                          const StreamRequest& request)
      : model_(std::move(model)),
        backend_(runtime::create_backend(model_->device(), spec.runtime.threads)),
        encoder_(model_, backend_.get(), offline_encoder_options(spec)),
        decoder_(&model_->decoder_weights()),
        segment_state_(decoder_.initial_state()),
        setup_(*model_, request) {}

  policy::commit::WindowPass decode(const policy::commit::WindowRequest& request) override {
    policy::commit::WindowPass pass;
    transducer::DecoderState state = segment_state_;
    WordAssembler words = setup_.words;  // as the segment began: its language, the first-word rule
    if (!request.audio.empty()) {
      words.add(greedy_emissions(decoder_, encode_audio(*model_, setup_.mel, encoder_, request.audio),
                                 setup_.prompt_slot, state),
                0.0, pass.words);
      words.flush(pass.words);
    }
    for (const Word& w : pass.words) pass.hypothesis.text += w.text;
    pass.language = words.language;
    if (request.is_last) {  // the segment ends: the next one starts where this one's decoding left off
      segment_state_ = std::move(state);
      setup_.words.language = words.language;
      setup_.words.stream_has_words = words.stream_has_words;
    }
    return pass;
  }
  void reset() override { segment_state_ = decoder_.initial_state(); }
  void warmup(const std::string& /*language*/) override {
    encode_audio(*model_, setup_.mel, encoder_, std::vector<float>(kSampleRate, 0.0f));
  }

 private:
  std::shared_ptr<const fastconformer::Model> model_;
  ggml_backend_ptr backend_;
  fastconformer::Encoder encoder_;
  transducer::Decoder decoder_;
  transducer::DecoderState segment_state_;
  TransducerSetup setup_;
};

// A cache-aware streaming model (Nemotron streaming): the streaming mel and
// encoder; each chunk of right + 1 frames is encoded and decoded as soon as its
// audio is in. A segment (up to a VAD pause or the end) is one encoder stream:
// its frame 0 is at the segment's first sample.
class StreamingTransducerProcessor : public TransducerWords {
 public:
  StreamingTransducerProcessor(std::shared_ptr<const fastconformer::Model> model, const ModelSpec& spec,
                               const StreamRequest& request, int right_context,
                               std::shared_ptr<fastconformer::StreamingBatcher> batcher)
      : TransducerWords(std::move(model), request),
        backend_(batcher ? nullptr : runtime::create_backend(model_->device(), spec.runtime.threads)),
        batcher_(std::move(batcher)),
        encoder_(model_, backend_.get(), {.right_context = right_context}, batcher_),
        mel_(mel_config(), model_->mel_filters(), model_->window()) {}

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
    result.processed_until = segment_start_ + done_frames_ * frame_seconds();
    return result;
  }

  ProcessResult start_silence() override { return process(true); }
  ProcessResult finish() override { return process(true); }
  void warmup() override {
    // A throwaway encoder: this stream's caches stay untouched.
    fastconformer::StreamingEncoder encoder(model_, backend_.get(), {.right_context = encoder_.right_context()},
                                            batcher_);
    features::NemoMelStream mel(mel_config(), model_->mel_filters(), model_->window());
    const std::vector<float> silence(kSampleRate, 0.0f);
    const features::FrameMajorMel m = mel.push(silence);
    encoder.push(m.data, m.n_frames);
  }

 private:
  ggml_backend_ptr backend_;  // null with a batcher (its executor computes)
  std::shared_ptr<fastconformer::StreamingBatcher> batcher_;
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
  const TransducerOptions own = spec.options<TransducerOptions>();
  const int lookahead_ms = own.lookahead_ms;
  if (!(own.window_seconds >= 1 && own.window_seconds <= 120))
    throw Error(ErrorCode::kInvalidArgument, "the transducer window must be 1 to 120 s");
  const fastconformer::Hparams& hp = model_->hparams();
  const int frame_ms = 1000 * hp.hop_length * hp.subsampling_factor / hp.sample_rate;
  if (hp.streaming()) {
    right_context_ = hp.att_right;
    if (lookahead_ms != 0) {
      if (lookahead_ms % frame_ms != 0)
        throw Error(ErrorCode::kInvalidArgument, "--lookahead-ms " + std::to_string(lookahead_ms) +
                                                     " is not a whole number of " + std::to_string(frame_ms) +
                                                     " ms encoder frames");
      right_context_ = lookahead_ms / frame_ms - 1;
    }
    fastconformer::check_streaming(hp, right_context_, "--lookahead-ms " + std::to_string(lookahead_ms));
    const int batch = spec.runtime.batch_streams;
    if (batch != 0 && (batch < 2 || batch > kMaxBatchStreams))
      throw Error(ErrorCode::kInvalidArgument, "--batch-decode must be 0 (off) or 2.." +
                                                   std::to_string(kMaxBatchStreams) + " streams per graph, got " +
                                                   std::to_string(batch));
    if (batch > 0) {
      batcher_ = std::make_shared<fastconformer::StreamingBatcher>(model_, batch, spec.runtime.threads,
                                                                   spec.runtime.cpu_kernels);
    }
  } else if (lookahead_ms != 0) {
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
  // An offline model: rolling passes show words while the audio arrives (the
  // default, for live streams); native decodes each window once, when it is full.
  capabilities_.policies =
      right_context_ >= 0 ? std::vector<std::string>{"native"} : std::vector<std::string>{"rolling", "native"};
}

std::unique_ptr<OnlineProcessor> TransducerEngine::open_stream(const StreamRequest& request) const {
  const std::string policy = resolve_policy(request.policy);
  if (right_context_ >= 0)
    return std::make_unique<StreamingTransducerProcessor>(model_, spec_, request, right_context_, batcher_);
  if (policy == "native") return std::make_unique<TransducerProcessor>(model_, spec_, request);
  policy::commit::RevisingConfig config = spec_.policies.rolling;
  config.language = request.language;
  config.max_segment_sec = spec_.options<TransducerOptions>().window_seconds;
  return std::make_unique<policy::commit::RevisingProcessor>(
      std::make_unique<TransducerWindowDecoder>(model_, spec_, request), std::move(config));
}

std::optional<BatchCounts> TransducerEngine::batch_counts() const {
  if (!batcher_) return std::nullopt;
  const fastconformer::StreamingBatcher::Counts c = batcher_->counts();
  return BatchCounts{c.steps, c.graphs, c.max_batch};
}

std::shared_ptr<const Engine> load_transducer_engine(const ModelSpec& spec) {
  ggml_backend_dev_t device = runtime::resolve_device(spec.runtime.device);
  return std::make_shared<TransducerEngine>(
      fastconformer::Model::load(spec.path, device, runtime::amx_wanted(spec.runtime.cpu_kernels, device)), spec);
}

}  // namespace earshot::engine
