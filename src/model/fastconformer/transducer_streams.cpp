#include "model/fastconformer/transducer_streams.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "common/sample_rate.h"
#include "features/nemo_mel.h"
#include "features/nemo_mel_stream.h"
#include "model/fastconformer/encoder.h"
#include "model/fastconformer/streaming_encoder.h"
#include "model/runtime/device.h"
#include "model/transducer/decoder.h"

namespace earshot::fastconformer {
namespace {

// SentencePiece pieces: "▁" starts a word; Nemotron 3.5's "<de-DE>" tags a language.
class Pieces : public TokenPieces {
 public:
  explicit Pieces(std::shared_ptr<const Model> model) : model_(std::move(model)) {}
  std::string text(int token, bool first_in_text) const override {
    return transducer::piece_text(model_->pieces().at(token), first_in_text);
  }
  bool starts_word(int token) const override { return transducer::piece_starts_word(model_->pieces().at(token)); }
  std::string language_tag(int token) const override { return transducer::language_tag(model_->pieces().at(token)); }
  int size() const override { return static_cast<int>(model_->pieces().size()); }

 private:
  std::shared_ptr<const Model> model_;
};

// Times a model pass for a PassReport (null: nothing): reported when it ends,
// also by a throw, unless dropped (a call that ran no pass).
class PassTimer {
 public:
  PassTimer(const PassReport& report, ModelPass pass)
      : report_(report), pass_(pass), start_(std::chrono::steady_clock::now()) {}
  ~PassTimer() {
    if (report_ && !dropped_) report_(pass_, std::chrono::steady_clock::now() - start_);
  }
  PassTimer(const PassTimer&) = delete;
  PassTimer& operator=(const PassTimer&) = delete;
  void drop() { dropped_ = true; }

 private:
  const PassReport& report_;
  ModelPass pass_;
  std::chrono::steady_clock::time_point start_;
  bool dropped_ = false;
};

// What both kinds of stream share: the features' settings, the decoder and its
// state, the prompt slot, the pieces, the pass report.
class StreamBase {
 public:
  StreamBase(std::shared_ptr<const Model> model, const std::string& language, features::NemoFrameCount mel_frames,
             PassReport on_pass)
      : on_pass_(std::move(on_pass)),
        model_(std::move(model)),
        pieces_(model_),
        decoder_(&model_->decoder_weights()),
        state_(decoder_.initial_state()) {
    const Hparams& hp = model_->hparams();
    // A prompt model is told the language through its one-hot (auto: the auto slot).
    if (hp.n_prompts > 0) prompt_slot_ = prompt_slot(hp, language);
    mel_.n_fft = hp.n_fft, mel_.hop_length = hp.hop_length, mel_.n_mels = hp.n_mels;
    mel_.preemph = hp.preemph, mel_.log_guard = hp.log_guard;
    mel_.normalize_per_feature = hp.feature_norm == FeatureNorm::kPerFeature;
    mel_.frame_count = mel_frames;
    frame_seconds_ = static_cast<double>(hp.hop_length * hp.subsampling_factor) / kSampleRate;
  }

 protected:
  // Greedy decoding of encoder frames (the prompt kernel first, for a prompt model) from `state`.
  std::vector<TokenEmission> greedy(const EncoderOutput& enc, transducer::DecoderState& state) const {
    std::vector<TokenEmission> out;
    if (enc.n_frames == 0) return out;
    PassTimer timer(on_pass_, ModelPass::kDecoder);
    const std::vector<float> joint_input =
        prompt_slot_ >= 0 ? decoder_.apply_prompt(enc.data, enc.n_frames, prompt_slot_) : std::vector<float>{};
    std::vector<transducer::Emission> emissions;
    const std::vector<float> projected =
        decoder_.project_encoder(prompt_slot_ >= 0 ? joint_input : enc.data, enc.n_frames);
    if (decoding_.beam > 1 && !steer_)
      decoder_.beam(projected, enc.n_frames, state, emissions, decoding_.beam, enc.first_frame, decoding_.boost.get());
    else
      decoder_.greedy(projected, enc.n_frames, state, emissions, enc.first_frame, steer_.get(),
                      steer_ ? nullptr : decoding_.boost.get());
    out.reserve(emissions.size());
    for (const transducer::Emission& e : emissions) out.push_back({e.token, e.frame, e.duration, e.token_log_prob});
    return out;
  }

  PassReport on_pass_;
  std::shared_ptr<const Model> model_;
  Pieces pieces_;
  transducer::Decoder decoder_;
  transducer::DecoderState state_;
  features::NemoMelConfig mel_;
  int prompt_slot_ = -1;  // a prompt model's one-hot slot; -1: no prompt kernel
  double frame_seconds_ = 0.08;
  std::shared_ptr<TransducerSteer> steer_;  // measurement only (bench's reference workload)
  TransducerDecoding decoding_;             // greedy or beam, boosted or not
};

class OfflineStream : public OfflineTransducer, StreamBase {
 public:
  OfflineStream(std::shared_ptr<const Model> model, int threads, runtime::CpuKernels cpu_kernels,
                const std::string& language, features::NemoFrameCount mel_frames, PassReport on_pass)
      : StreamBase(std::move(model), language, mel_frames, std::move(on_pass)),
        backend_(runtime::create_backend(model_->device(), threads)),
        encoder_(model_, backend_.get(), [&] {
          EncoderOptions options;
          options.cpu_kernels = cpu_kernels;
          return options;
        }()) {}

  const TokenPieces& pieces() const override { return pieces_; }
  double frame_seconds() const override { return frame_seconds_; }
  void reset_state() override { state_ = decoder_.initial_state(); }
  void warmup() override { encode(std::vector<float>(kSampleRate, 0.0f)); }
  void set_decoding(TransducerDecoding decoding) override {
    decoding_ = std::move(decoding);
    state_.boost = 0;
  }

  std::vector<TokenEmission> decode(std::span<const float> audio, bool keep_state) override {
    if (audio.empty()) return {};
    transducer::DecoderState state = state_;
    std::vector<TokenEmission> out = greedy(encode(audio), state);
    if (keep_state) state_ = std::move(state);
    return out;
  }

 private:
  // NeMo's features (normalised over this audio when the model says so), then
  // the encoder; audio shorter than one hop has no frame (and runs no pass).
  EncoderOutput encode(std::span<const float> audio) {
    PassTimer timer(on_pass_, ModelPass::kEncoder);
    const features::FrameMajorMel mel = features::nemo_log_mel(audio, mel_, model_->mel_filters(), model_->window());
    if (mel.n_frames == 0) {
      timer.drop();
      return {};
    }
    return encoder_.encode(mel.data, mel.n_frames);
  }

  ggml_backend_ptr backend_;
  Encoder encoder_;
};

class StreamingStream : public StreamingTransducer, StreamBase {
 public:
  StreamingStream(std::shared_ptr<const Model> model, int threads, runtime::CpuKernels cpu_kernels, int right_context,
                  std::shared_ptr<StreamingBatcher> batcher, const std::string& language,
                  features::NemoFrameCount mel_frames, PassReport on_pass, std::shared_ptr<TransducerSteer> steer)
      : StreamBase(std::move(model), language, mel_frames, std::move(on_pass)),
        backend_(batcher ? nullptr : runtime::create_backend(model_->device(), threads)),
        batcher_(std::move(batcher)),
        encoder_(model_, backend_.get(), {.right_context = right_context, .cpu_kernels = cpu_kernels}, batcher_),
        mel_stream_(mel_, model_->mel_filters(), model_->window()) {
    if (steer) {
      const transducer::DecoderWeights& w = decoder_.weights();
      steer->bind(pieces_, w.n_vocab, w.durations, frame_seconds_);
      steer_ = std::move(steer);
    }
  }

  const TokenPieces& pieces() const override { return pieces_; }
  double frame_seconds() const override { return frame_seconds_; }
  void reset_state() override { state_ = decoder_.initial_state(); }
  void set_decoding(TransducerDecoding decoding) override {
    decoding_ = std::move(decoding);
    state_.boost = 0;
  }
  void warmup() override {
    prepared_.reset();
    // A throwaway encoder: this stream's caches stay untouched.
    StreamingEncoder encoder(model_, backend_.get(), encoder_.options(), batcher_);
    features::NemoMelStream mel(mel_, model_->mel_filters(), model_->window());
    const std::vector<float> silence(kSampleRate, 0.0f);
    const features::FrameMajorMel m = mel.push(silence);
    encoder.push(m.data, m.n_frames);
  }

  std::vector<TokenEmission> push(std::span<const float> samples) override {
    prepared_.reset();
    const features::FrameMajorMel mel = mel_stream_.push(samples);
    return greedy(encode([&] { return encoder_.push(mel.data, mel.n_frames); }), state_);
  }
  std::vector<TokenEmission> finish() override { return finish_with({}); }
  std::vector<TokenEmission> finish_with(std::span<const float> samples) override {
    EncoderOutput enc;
    if (prepared_ && std::ranges::equal(prepared_->samples, samples)) {
      // Encoded ahead: take the output and the state after it; decode now (the
      // prediction network's state and any steering are as they are now).
      enc = std::move(prepared_->output);
      encoder_.restore(std::move(prepared_->encoder));
      mel_stream_ = std::move(prepared_->mel);
    } else {
      enc = encode_rest(samples);
    }
    prepared_.reset();
    return greedy(enc, state_);
  }
  void prepare_finish(std::span<const float> samples) override {
    if (prepared_ && std::ranges::equal(prepared_->samples, samples)) return;
    prepared_.reset();
    detail::StreamState encoder_before = encoder_.state();
    features::NemoMelStream mel_before = mel_stream_;
    EncoderOutput output = encode_rest(samples);
    prepared_.emplace(
        Prepared{{samples.begin(), samples.end()}, std::move(output), encoder_.state(), std::move(mel_stream_)});
    encoder_.restore(std::move(encoder_before));
    mel_stream_ = std::move(mel_before);
  }
  int frames_done() const override { return encoder_.frames_done(); }

 private:
  // A finish encoded ahead (prepare_finish): for these samples, the output and
  // the encoder and mel states after it.
  struct Prepared {
    std::vector<float> samples;
    EncoderOutput output;
    detail::StreamState encoder;
    features::NemoMelStream mel;
  };

  // The mel of the samples and the stream's last frames, then every remaining
  // chunk at once: one encoder pass up to kMaxStepFrames frames (the output is the
  // same whatever the split of the mel).
  EncoderOutput encode_rest(std::span<const float> samples) {
    features::FrameMajorMel mel = mel_stream_.push(samples);
    const features::FrameMajorMel rest = mel_stream_.finish();
    mel.data.insert(mel.data.end(), rest.data.begin(), rest.data.end());
    encoder_.append_mel(mel.data, mel.n_frames + rest.n_frames);
    return encode([&] { return encoder_.finish(); });
  }

  // An encoder call, reported as a pass when it ran a step (gave frames).
  template <typename Call>
  EncoderOutput encode(Call call) {
    PassTimer timer(on_pass_, ModelPass::kEncoder);
    EncoderOutput out = call();
    if (out.n_frames == 0) timer.drop();
    return out;
  }

  ggml_backend_ptr backend_;  // null with a batcher (its executor computes)
  std::shared_ptr<StreamingBatcher> batcher_;
  StreamingEncoder encoder_;
  features::NemoMelStream mel_stream_;
  std::optional<Prepared> prepared_;
};

}  // namespace

std::unique_ptr<OfflineTransducer> open_offline_stream(std::shared_ptr<const Model> model, int threads,
                                                       runtime::CpuKernels cpu_kernels, const std::string& language,
                                                       features::NemoFrameCount mel_frames, PassReport on_pass) {
  return std::make_unique<OfflineStream>(std::move(model), threads, cpu_kernels, language, mel_frames,
                                         std::move(on_pass));
}

std::unique_ptr<StreamingTransducer> open_streaming_stream(std::shared_ptr<const Model> model, int threads,
                                                           runtime::CpuKernels cpu_kernels, int right_context,
                                                           std::shared_ptr<StreamingBatcher> batcher,
                                                           const std::string& language,
                                                           features::NemoFrameCount mel_frames, PassReport on_pass,
                                                           std::shared_ptr<TransducerSteer> steer) {
  return std::make_unique<StreamingStream>(std::move(model), threads, cpu_kernels, right_context, std::move(batcher),
                                           language, mel_frames, std::move(on_pass), std::move(steer));
}

}  // namespace earshot::fastconformer
