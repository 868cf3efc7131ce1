#include "bench/whispercpp_stream.h"

#include <whisper.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/error.h"
#include "common/sample_rate.h"

namespace earshot::bench {
namespace {

static_assert(WHISPER_SAMPLE_RATE == kSampleRate, "libwhisper takes earshot's sample rate");

class WhisperCppStream : public OnlineProcessor {
 public:
  explicit WhisperCppStream(const WhisperCppStreamOptions& o) : options_(o) {
    whisper_context_params cparams = whisper_context_default_params();
    cparams.use_gpu = o.use_gpu;
    cparams.flash_attn = true;
    ctx_ = whisper_init_from_file_with_params(o.model_path.c_str(), cparams);
    if (!ctx_)
      throw Error(ErrorCode::kInvalidModel, "libwhisper could not load " + o.model_path + " (see its log above)");
    if (o.language != "auto" && whisper_lang_id(o.language.c_str()) == -1)
      throw Error(ErrorCode::kInvalidArgument, "whispercpp-stream: unknown language '" + o.language + "'");
    // stream.cpp: keep <= step, length >= step, n_new_line = max(1, length/step - 1).
    keep_ms_ = std::min(o.keep_ms, o.step_ms);
    length_ms_ = std::max(o.length_ms, o.step_ms);
    n_samples_step_ = static_cast<int>(1e-3 * o.step_ms * kSampleRate);
    n_samples_len_ = static_cast<int>(1e-3 * length_ms_ * kSampleRate);
    n_samples_keep_ = static_cast<int>(1e-3 * keep_ms_ * kSampleRate);
    n_new_line_ = std::max(1, length_ms_ / o.step_ms - 1);
    stats_.available = true;
  }
  ~WhisperCppStream() override { whisper_free(ctx_); }

  void insert_audio(std::span<const float> samples, double) override {
    pending_.insert(pending_.end(), samples.begin(), samples.end());
  }

  ProcessResult process(bool is_last) override {
    ProcessResult result;
    while (static_cast<int>(pending_.size()) >= n_samples_step_) {
      std::vector<float> step(pending_.begin(), pending_.begin() + n_samples_step_);
      pending_.erase(pending_.begin(), pending_.begin() + n_samples_step_);
      run_step(step, result);
    }
    if (is_last) {
      if (!pending_.empty()) {
        std::vector<float> step;
        step.swap(pending_);
        run_step(step, result);
      }
      result.committed.insert(result.committed.end(), line_.begin(), line_.end());
      committed_.insert(committed_.end(), line_.begin(), line_.end());
      line_.clear();
    }
    result.processed_until = static_cast<double>(consumed_) / kSampleRate;
    return result;
  }

  std::vector<Word> provisional() const override { return line_; }
  std::vector<Word> hypothesis() const override {
    std::vector<Word> h = committed_;
    h.insert(h.end(), line_.begin(), line_.end());
    return h;
  }
  ProcessResult start_silence() override { return process(true); }
  void end_silence(double, double) override {}
  ProcessResult finish() override { return process(true); }
  void warmup() override {
    // One decode of 1 s of silence, like a first stream.cpp iteration.
    std::vector<float> silence(kSampleRate, 0.0f);
    whisper_full_params p = params();
    whisper_full(ctx_, p, silence.data(), static_cast<int>(silence.size()));
  }
  std::string language() const override { return options_.language; }

  ComputeStats stats() const { return stats_; }

 private:
  whisper_full_params params() const {
    whisper_full_params p = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
    p.print_progress = false;
    p.print_special = false;
    p.print_realtime = false;
    p.print_timestamps = false;  // !no_timestamps, and no_timestamps = !use_vad = true
    p.no_timestamps = true;
    p.translate = false;
    p.single_segment = true;
    p.max_tokens = 0;
    p.language = options_.language.c_str();
    p.n_threads = options_.threads;
    p.audio_ctx = 0;
    p.prompt_tokens = nullptr;  // no_context
    p.prompt_n_tokens = 0;
    if (options_.no_fallback) p.temperature_inc = 0.0f;  // stream.cpp -nf
    p.token_timestamps = true;                           // for word end times only; does not change decoding
    return p;
  }

  void run_step(const std::vector<float>& fresh, ProcessResult& result) {
    const int n_new = static_cast<int>(fresh.size());
    const int n_take = std::min(static_cast<int>(old_.size()), std::max(0, n_samples_keep_ + n_samples_len_ - n_new));
    std::vector<float> window(old_.end() - n_take, old_.end());
    window.insert(window.end(), fresh.begin(), fresh.end());
    const double window_start = static_cast<double>(consumed_ - n_take) / kSampleRate;
    consumed_ += n_new;
    const double window_end = static_cast<double>(consumed_) / kSampleRate;
    old_ = window;

    if (window.size() >= static_cast<size_t>(kSampleRate / 10)) {  // whisper_full ignores < 100 ms
      whisper_full_params p = params();
      whisper_reset_timings(ctx_);
      const auto t0 = std::chrono::steady_clock::now();
      if (whisper_full(ctx_, p, window.data(), static_cast<int>(window.size())) != 0)
        throw Error(ErrorCode::kInternal, "whispercpp-stream: whisper_full failed");
      const double pass = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double encode = 0;
      if (whisper_timings* t = whisper_get_timings(ctx_)) {
        encode = std::min(pass, 1e-3 * t->encode_ms);  // one encoder run per window (<= 30 s)
        delete t;
      }
      stats_.encoder_passes++;
      stats_.encoder_seconds += encode;
      stats_.decoder_seconds += pass - encode;  // decoding, sampling, fallbacks and mel: the rest of the pass
      line_ = words(window_start, window_end);
    }
    ++n_iter_;
    if (n_iter_ % n_new_line_ == 0) {
      result.committed.insert(result.committed.end(), line_.begin(), line_.end());
      committed_.insert(committed_.end(), line_.begin(), line_.end());
      line_.clear();
      old_.assign(window.end() - std::min<size_t>(window.size(), n_samples_keep_), window.end());
    }
  }

  std::vector<Word> words(double window_start, double window_end) const {
    std::vector<Word> out;
    const whisper_token eot = whisper_token_eot(ctx_);
    for (int s = 0; s < whisper_full_n_segments(ctx_); ++s) {
      const double seg_end = window_start + 0.01 * static_cast<double>(whisper_full_get_segment_t1(ctx_, s));
      for (int k = 0; k < whisper_full_n_tokens(ctx_, s); ++k) {
        const whisper_token_data d = whisper_full_get_token_data(ctx_, s, k);
        if (d.id >= eot) continue;  // special and timestamp tokens
        const char* text = whisper_full_get_token_text(ctx_, s, k);
        if (!text || !*text) continue;
        const double start = d.t0 >= 0 ? window_start + 0.01 * static_cast<double>(d.t0) : window_start;
        const double end = d.t1 >= 0 ? window_start + 0.01 * static_cast<double>(d.t1) : seg_end;
        if (out.empty() || text[0] == ' ') {
          Word w;
          w.start = std::clamp(start, window_start, window_end);
          w.language = options_.language;
          out.push_back(w);
        }
        out.back().text += text;
        out.back().end = std::clamp(end, out.back().start, window_end);
      }
    }
    return out;
  }

  WhisperCppStreamOptions options_;
  whisper_context* ctx_ = nullptr;
  int keep_ms_ = 0, length_ms_ = 0;
  int n_samples_step_ = 0, n_samples_len_ = 0, n_samples_keep_ = 0, n_new_line_ = 1;
  std::vector<float> pending_, old_;
  long consumed_ = 0;  // samples consumed by steps
  int n_iter_ = 0;
  std::vector<Word> line_, committed_;
  ComputeStats stats_;
};

}  // namespace

StreamHandle make_whispercpp_stream(const WhisperCppStreamOptions& options) {
  auto stream = std::make_unique<WhisperCppStream>(options);
  WhisperCppStream* raw = stream.get();
  StreamHandle h;
  h.stats = [raw] { return raw->stats(); };
  h.processor = std::move(stream);
  return h;
}

}  // namespace earshot::bench
