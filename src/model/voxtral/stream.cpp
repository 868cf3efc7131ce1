#include "model/voxtral/stream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "common/error.h"
#include "model/runtime/device.h"
#include "model/runtime/openblas_ops.h"

namespace earshot::voxtral {
namespace {

constexpr int kRightBufferSlots = 10;  // mistral-common's OFFLINE_STREAMING_BUFFER_TOKENS

// Times a graph for PassReport, also when it throws.
class PassTimer {
 public:
  PassTimer(const PassReport& report, ModelPass pass)
      : report_(report), pass_(pass), start_(std::chrono::steady_clock::now()) {}
  ~PassTimer() {
    if (report_) report_(pass_, std::chrono::steady_clock::now() - start_);
  }

 private:
  const PassReport& report_;
  ModelPass pass_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

int64_t right_padding(const Hparams& hp, int delay, int64_t samples) {
  const int64_t slot = hp.samples_per_slot();
  return (slot - samples % slot) % slot + static_cast<int64_t>(delay + 1 + kRightBufferSlots) * slot;
}

Stream::Stream(std::shared_ptr<const Model> model, StreamOptions options)
    : model_(std::move(model)),
      options_(std::move(options)),
      delay_(options_.delay < 0 ? model_->hparams().default_delay : options_.delay),
      log_mel_(model_->hparams(), model_->mel_filters(), model_->window()) {
  const Hparams& hp = model_->hparams();
  if (delay_ < 1 || delay_ > 30)
    throw Error(ErrorCode::kInvalidArgument,
                "a Voxtral delay of " + std::to_string(delay_) + " slots (1 to 30: " + published_delays_text() + ")");
  if (options_.max_encoder_slots < 1) throw Error(ErrorCode::kInvalidArgument, "max_encoder_slots must be >= 1");
  if (options_.min_encoder_slots < 1) throw Error(ErrorCode::kInvalidArgument, "min_encoder_slots must be >= 1");
  min_encoder_slots_ = std::min(options_.min_encoder_slots, options_.max_encoder_slots);
  prompt_len_ = 1 + hp.n_left_pad + delay_;
  scales_ = model_->ada_scales(delay_);
  if (options_.backend) {
    backend_ = options_.backend;
  } else {
    own_backend_ = runtime::create_backend(model_->device(), options_.threads);
    backend_ = own_backend_.get();
  }
  kernels_.cpu = runtime::is_cpu(runtime::device_of(backend_));
  kernels_.rows = options_.rows_decoder;
  // Earshot's kernels (not --cpu-kernels ggml): the encoder's and prompts' attention on OpenBLAS where it loads.
  kernels_.openblas_attention = kernels_.cpu && options_.rows_decoder && runtime::openblas_available();
  runner_ =
      std::make_unique<runtime::GraphRunner>(backend_, std::vector<std::string>{"Voxtral encoder", "Voxtral decoder"});
  // A graph stores up to max_encoder_slots x downsample frames past the window.
  enc_ring_ =
      std::make_unique<KvRing>(backend_, hp.enc_n_layer, hp.enc_q_dim(),
                               hp.enc_window + hp.downsample * options_.max_encoder_slots, options_.kv_type, 256);
  dec_ring_ =
      std::make_unique<KvRing>(backend_, hp.n_layer, hp.kv_dim(), hp.window + prompt_len_, options_.kv_type, 64);
  mel_prev_.assign(2 * static_cast<size_t>(hp.n_mels), 0.0f);
  conv0_prev_.assign(hp.enc_d, 0.0f);
}

Stream::~Stream() = default;

size_t Stream::cache_bytes() const {
  return enc_ring_->bytes() + dec_ring_->bytes() + signal_.capacity() * sizeof(float) +
         mel_.capacity() * sizeof(float) + logits_.capacity() * sizeof(float);
}

void Stream::start_context() {
  const Hparams& hp = model_->hparams();
  active_ = true;
  ended_ = false;
  ++contexts_;
  signal_.assign(static_cast<size_t>(hp.n_left_pad) * hp.samples_per_slot(), 0.0f);  // the silence in front
  signal_first_ = 0;
  signal_end_ = static_cast<int64_t>(signal_.size());
  segment_slot0_ = hp.n_left_pad;
  mel_done_ = 0;
  mel_.clear();
  std::fill(mel_prev_.begin(), mel_prev_.end(), 0.0f);  // the first conv's left padding
  std::fill(conv0_prev_.begin(), conv0_prev_.end(), 0.0f);
  slots_encoded_ = 0;
  audio_.clear();
  positions_ = 0;
  last_token_ = hp.bos;
  boost_state_ = 0;
  enc_ring_->reset();
  dec_ring_->reset();
  audio_kept_.clear();
  prompted_ = false;
  if (!context_start_) {
    const ContextStarts::Key key{delay_,
                                 options_.kv_type,
                                 options_.max_encoder_slots,
                                 kernels_.cpu,
                                 kernels_.rows,
                                 kernels_.openblas_attention,
                                 runtime::device_of(backend_)};
    if (options_.context_starts) context_start_ = options_.context_starts->find(key);
    if (!context_start_) {
      context_start_ = compute_context_start();
      if (options_.context_starts) context_start_ = options_.context_starts->keep(key, context_start_);
    }
  }
  restore_context_start();
}

std::shared_ptr<const ContextStart> ContextStarts::find(const Key& key) const {
  std::lock_guard lock(mutex_);
  const auto it = starts_.find(key);
  if (it == starts_.end()) return nullptr;
  it->second.used = ++tick_;
  return it->second.start;
}

std::shared_ptr<const ContextStart> ContextStarts::keep(const Key& key, std::shared_ptr<const ContextStart> start) {
  std::lock_guard lock(mutex_);
  auto [kept, inserted] = starts_.emplace(key, Entry{std::move(start), 0});
  kept->second.used = ++tick_;
  // Past kKept, the least recently used start that only this map holds goes (a
  // stream holds its start for its life: never one in use, nor the one just kept).
  while (starts_.size() > kKept) {
    auto oldest = starts_.end();
    for (auto it = starts_.begin(); it != starts_.end(); ++it) {
      if (it == kept || it->second.start.use_count() > 1) continue;
      if (oldest == starts_.end() || it->second.used < oldest->second.used) oldest = it;
    }
    if (oldest == starts_.end()) break;  // every start is in use
    starts_.erase(oldest);
  }
  return kept->second.start;
}

size_t ContextStarts::size() const {
  std::lock_guard lock(mutex_);
  return starts_.size();
}

struct ContextStart {
  int slots = 0;  // slots encoded, and the prompt's positions decoded over them
  int64_t mel_done = 0;
  std::vector<float> mel, mel_prev, conv0_prev, audio;  // audio: the slots' embeddings
  KvRing::Saved enc, dec;
};

std::shared_ptr<const ContextStart> Stream::compute_context_start() {
  // The signal is the silence in front alone: the frames it holds whole, their slots.
  compute_frames(/*closed=*/false);
  const Hparams& hp = model_->hparams();
  for (;;) {
    const int64_t ready = mel_done_ / hp.mel_frames_per_slot - slots_encoded_;
    if (ready <= 0) break;
    encode(static_cast<int>(std::min<int64_t>(ready, options_.max_encoder_slots)));
  }
  auto start = std::make_shared<ContextStart>();
  // The silence in front is n_left_pad slots and its last one's frames reach into
  // the audio, so the prompt's last position (1 + n_left_pad + delay slots) always
  // waits for audio: its logits give the context's first token.
  if (slots_encoded_ >= prompt_len_) throw Error(ErrorCode::kInternal, "Voxtral: a prompt within the left padding");
  start->slots = static_cast<int>(slots_encoded_);
  for (int s = 0; s < start->slots; ++s) start->audio.insert(start->audio.end(), audio_[s].begin(), audio_[s].end());
  std::vector<TokenEmission> none;
  if (start->slots > 0) decode_prompt_rows(0, start->slots, /*take=*/false, none);
  start->mel_done = mel_done_;
  start->mel = mel_;
  start->mel_prev = mel_prev_;
  start->conv0_prev = conv0_prev_;
  start->enc = enc_ring_->save();
  start->dec = dec_ring_->save();
  return start;
}

int Stream::context_start_slots() const { return context_start_ ? context_start_->slots : 0; }

void Stream::restore_context_start() {
  const ContextStart& start = *context_start_;
  mel_done_ = start.mel_done;
  mel_ = start.mel;
  mel_prev_ = start.mel_prev;
  conv0_prev_ = start.conv0_prev;
  enc_ring_->restore(start.enc);
  dec_ring_->restore(start.dec);
  slots_encoded_ = start.slots;
  audio_.clear();
  positions_ = start.slots;
  if (keep_audio_) audio_kept_.assign(start.audio.begin(), start.audio.end());
}

void Stream::append_signal(std::span<const float> samples) {
  signal_.insert(signal_.end(), samples.begin(), samples.end());
  signal_end_ += static_cast<int64_t>(samples.size());
}

std::vector<TokenEmission> Stream::push(std::span<const float> samples) {
  std::vector<TokenEmission> out;
  if (samples.empty()) return out;
  if (reset_) {
    reset_ = false;
    active_ = false;
  }
  if (!active_) start_context();
  append_signal(samples);
  audio_end_ = signal_end_;
  advance(/*closed=*/false, out);
  return out;
}

std::vector<TokenEmission> Stream::finish() {
  std::vector<TokenEmission> out;
  if (!active_) return out;
  const Hparams& hp = model_->hparams();
  // The segment's right padding, as the reference appends it after the audio.
  append_signal(std::vector<float>(static_cast<size_t>(right_padding(hp, delay_, signal_end_)), 0.0f));
  advance(/*closed=*/true, out);
  boost_state_ = 0;  // a phrase cut short by the segment's end is no match
  // The next segment starts at the next slot of the same context.
  segment_slot0_ = signal_end_ / hp.samples_per_slot();
  return out;
}

int Stream::frames_done() const {
  if (!active_) return 0;
  return static_cast<int>(std::max<int64_t>(0, positions_ - delay_ - segment_slot0_));
}

void Stream::compute_frames(bool closed) {
  const Hparams& hp = model_->hparams();
  const int64_t half = hp.n_fft / 2;
  // Frames: each once its samples are in (closed: the signal ends here, zeros
  // after, and it has signal / hop frames, the reference dropping its last STFT frame).
  const int64_t closed_frames = signal_end_ / hp.hop;
  while (closed ? mel_done_ < closed_frames : mel_done_ * hp.hop + half <= signal_end_) {
    const size_t at = mel_.size();
    mel_.resize(at + hp.n_mels);
    log_mel_.frame(std::span<const float>(signal_), signal_first_, mel_done_, mel_.data() + at, fft_workspace_);
    ++mel_done_;
  }
}

void Stream::advance(bool closed, std::vector<TokenEmission>& out) {
  const Hparams& hp = model_->hparams();
  compute_frames(closed);
  for (;;) {
    const int64_t ready = mel_done_ / hp.mel_frames_per_slot - slots_encoded_;
    if (ready <= 0 || ended_ || (!closed && ready < min_encoder_slots_)) break;
    encode(static_cast<int>(std::min<int64_t>(ready, options_.max_encoder_slots)));
    if (!prompted_ && slots_encoded_ >= prompt_len_) decode_prompt(out);
    if (prompted_ && positions_ < slots_encoded_ && !ended_) {
      std::optional<StepBatcher::Run> run;  // the batcher waits for this stream's steps while it has some
      if (options_.batcher) run.emplace(*options_.batcher);
      while (positions_ < slots_encoded_ && !ended_) decode_step(out);
    }
  }
  if (ended_) {
    restart_after_end(out, closed);
    return;
  }
  trim_signal();
}

void Stream::encode(int slots) {
  const Hparams& hp = model_->hparams();
  PassTimer timer(options_.on_pass, ModelPass::kEncoder);
  const int frames = hp.mel_frames_per_slot * slots, n = frames / 2;
  enc_ring_->reserve(n);
  runtime::GraphRunner::Graph g = runner_->begin(encoder_graph_nodes(hp), 0);
  const EncoderGraph eg = build_encoder(g.ctx(), g.graph(), *model_, *enc_ring_, slots, kernels_);
  runner_->allocate(g, std::to_string(slots) + " slots");
  // The conv's input, time contiguous per mel bin: the 2 frames before, then these.
  std::vector<float> mel(static_cast<size_t>(frames + 2) * hp.n_mels);
  for (int c = 0; c < hp.n_mels; ++c) {
    float* row = mel.data() + static_cast<size_t>(c) * (frames + 2);
    row[0] = mel_prev_[c];
    row[1] = mel_prev_[hp.n_mels + c];
    for (int t = 0; t < frames; ++t) row[2 + t] = mel_[static_cast<size_t>(t) * hp.n_mels + c];
  }
  runtime::set_input(eg.mel, mel);
  runtime::set_input(eg.conv0_prev, conv0_prev_);
  std::vector<int32_t> positions(n);
  for (int i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(enc_ring_->positions() + i);
  runtime::set_input(eg.positions, positions);
  enc_ring_->set_mask(eg.mask, n, hp.enc_window, mask_scratch_);
  runner_->compute(g);
  const std::vector<float> audio = runtime::read_output(eg.audio);
  conv0_prev_ = runtime::read_output(eg.conv0_last);
  enc_ring_->advance(n);
  std::copy(mel_.begin() + static_cast<std::ptrdiff_t>(frames - 2) * hp.n_mels,
            mel_.begin() + static_cast<std::ptrdiff_t>(frames) * hp.n_mels, mel_prev_.begin());
  mel_.erase(mel_.begin(), mel_.begin() + static_cast<std::ptrdiff_t>(frames) * hp.n_mels);
  for (int s = 0; s < slots; ++s)
    audio_.emplace_back(audio.begin() + static_cast<std::ptrdiff_t>(s) * hp.d,
                        audio.begin() + static_cast<std::ptrdiff_t>(s + 1) * hp.d);
  if (keep_audio_) audio_kept_.insert(audio_kept_.end(), audio.begin(), audio.end());
  slots_encoded_ += slots;
}

void Stream::decode_prompt(std::vector<TokenEmission>& out) {
  const int first = static_cast<int>(positions_);  // those before: the context's start, restored
  decode_prompt_rows(first, prompt_len_ - first, /*take=*/true, out);
  prompted_ = true;
}

void Stream::decode_prompt_rows(int first, int n, bool take, std::vector<TokenEmission>& out) {
  const Hparams& hp = model_->hparams();
  PassTimer timer(options_.on_pass, ModelPass::kDecoder);
  dec_ring_->reserve(n);
  const DecoderPart part{dec_ring_.get(), n, delay_};
  runtime::GraphRunner::Graph g = runner_->begin(decoder_graph_nodes(hp, 1), 1);
  const DecoderGraph dg = build_decoder(g.ctx(), g.graph(), *model_, std::span<const DecoderPart>(&part, 1), kernels_);
  runner_->allocate(g, "the prompt");
  std::vector<int32_t> tokens(n, hp.streaming_pad), positions(n);
  if (first == 0) tokens[0] = hp.bos;
  std::vector<float> audio(static_cast<size_t>(n) * hp.d);
  for (int i = 0; i < n; ++i) {
    positions[i] = first + i;
    std::copy(audio_[i].begin(), audio_[i].end(), audio.begin() + static_cast<std::ptrdiff_t>(i) * hp.d);
  }
  runtime::set_input(dg.tokens, tokens);
  runtime::set_input(dg.audio, audio);
  runtime::set_input(dg.positions, positions);
  runtime::set_input(dg.scales, *scales_);
  dec_ring_->set_mask(dg.masks[0], n, hp.window, mask_scratch_);
  runner_->compute(g);
  dec_ring_->advance(n);
  audio_.erase(audio_.begin(), audio_.begin() + n);
  positions_ = first + n;
  if (!take) return;
  logits_ = runtime::read_output(dg.logits);
  positions_ = first + n - 1;  // the prompt's last position produced the token
  take_token(logits_, out);
  positions_ = first + n;
}

void Stream::decode_step(std::vector<TokenEmission>& out) {
  PassTimer timer(options_.on_pass, ModelPass::kDecoder);
  dec_ring_->reserve(1);
  const StepRequest request{model_.get(), dec_ring_.get(), delay_, scales_.get(), last_token_, audio_.front().data()};
  logits_ = options_.batcher
                ? options_.batcher->step(request)
                : run_steps(*runner_, 1, kernels_, std::span<const StepRequest>(&request, 1), mask_scratch_);
  dec_ring_->advance(1);
  audio_.pop_front();
  take_token(logits_, out);
  ++positions_;
}

int Stream::boosted_choice(std::span<const float> logits) {
  // A logit differs from its log-probability by one constant: scores add alike.
  const Vocab& vocab = model_->vocab();
  const float leave = boost_->leave(boost_state_);
  const std::span<const TokenBoost::Arc> arcs = boost_->arcs(boost_state_);
  int token = 0;
  float best = -std::numeric_limits<float>::infinity();
  size_t arc = 0;
  int next = 0;
  for (int t = 0; t < static_cast<int>(logits.size()); ++t) {
    while (arc < arcs.size() && arcs[arc].token < t) ++arc;
    const bool on_arc = arc < arcs.size() && arcs[arc].token == t;
    const float score = logits[static_cast<size_t>(t)] + (on_arc                ? arcs[arc].score
                                                          : vocab.is_control(t) ? 0.0f
                                                                                : leave);
    if (score > best) {
      best = score;
      token = t;
      next = on_arc ? arcs[arc].next : vocab.is_control(t) ? boost_state_ : 0;
    }
  }
  boost_state_ = next;
  return token;
}

void Stream::take_token(std::span<const float> logits, std::vector<TokenEmission>& out) {
  const Hparams& hp = model_->hparams();
  const float top = *std::max_element(logits.begin(), logits.end());
  const int token = boost_ ? boosted_choice(logits)
                           : static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - top));
  const float log_prob = logits[static_cast<size_t>(token)] - top - static_cast<float>(std::log(sum));
  last_token_ = token;
  if (observer_) observer_(PositionOutput{positions_, token, logits});
  if (token == hp.eos || positions_ + 1 >= hp.max_position) ended_ = true;
  const Vocab& vocab = model_->vocab();
  if (vocab.is_control(token) && token != hp.streaming_word) return;
  const int64_t frame = std::max<int64_t>(0, positions_ - delay_ - segment_slot0_);
  out.push_back(TokenEmission{token, static_cast<int>(frame), 1, log_prob});
}

void Stream::restart_after_end(std::vector<TokenEmission>& out, bool closed) {
  // The context is over (EOS, or its last position): the segment's audio not
  // decoded yet starts a new one, its slots still counted from the segment's
  // first sample. The right padding is not audio: only what came before it.
  const Hparams& hp = model_->hparams();
  const int64_t slot = hp.samples_per_slot();
  const int64_t real_start = std::max<int64_t>(segment_slot0_, hp.n_left_pad) * slot;
  const int64_t from = std::max(positions_ * slot, real_start);
  std::vector<float> rest;
  if (from < audio_end_ && from >= signal_first_)
    rest.assign(signal_.begin() + (from - signal_first_), signal_.begin() + (audio_end_ - signal_first_));
  const int64_t consumed_slots = from / slot - segment_slot0_;
  active_ = false;
  if (rest.empty()) return;
  start_context();
  segment_slot0_ = hp.n_left_pad - consumed_slots;
  append_signal(rest);
  audio_end_ = signal_end_;
  if (closed) append_signal(std::vector<float>(static_cast<size_t>(right_padding(hp, delay_, signal_end_)), 0.0f));
  advance(closed, out);
}

void Stream::trim_signal() {
  const Hparams& hp = model_->hparams();
  const int64_t keep_from =
      std::min(mel_done_ * hp.hop - hp.n_fft / 2, positions_ * static_cast<int64_t>(hp.samples_per_slot()));
  const int64_t drop = keep_from - signal_first_;
  if (drop <= 0) return;
  signal_.erase(signal_.begin(), signal_.begin() + drop);
  signal_first_ = keep_from;
}

void Stream::warmup() {
  StreamOptions options = options_;
  options.on_pass = nullptr;
  options.backend = backend_;
  options.batcher = nullptr;
  Stream scratch(model_, options);
  const std::vector<float> second(static_cast<size_t>(model_->hparams().sample_rate), 0.0f);
  scratch.push(second);
  scratch.finish();
}

void Stream::set_decoding(TransducerDecoding decoding) {
  if (decoding.beam > 1)
    throw Error(ErrorCode::kUnsupported, "Voxtral Realtime decodes greedily: beam search is not supported for it yet");
  boost_ = std::move(decoding.boost);
  boost_state_ = 0;
}

}  // namespace earshot::voxtral
