// A second model family for the tests: "ticks", read from a GGUF file whose
// general.architecture is "earshot-test-ticks". Its processor commits one word
// per half second of speech with native times (a transducer's shape: no commit
// policy, append-only), so everything above the engine boundary can be checked
// to run a family it has never heard of, unchanged.
#pragma once

#include <gguf.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/error.h"
#include "engine/families.h"

namespace earshot::engine::testing {

inline constexpr const char* kTicksArchitecture = "earshot-test-ticks";

class TicksProcessor : public OnlineProcessor {
 public:
  explicit TicksProcessor(std::string language) : language_(std::move(language)) {}
  void insert_audio(std::span<const float> samples, double stream_end_time) override {
    pending_ += samples.size();
    end_ = stream_end_time;
  }
  ProcessResult process(bool is_last) override {
    ProcessResult r;
    while (pending_ >= kTick) {
      pending_ -= kTick;
      r.committed.push_back(tick());
    }
    if (is_last && pending_ > 0) {
      pending_ = 0;
      r.committed.push_back(tick());
    }
    r.processed_until = end_;
    return r;
  }
  std::vector<Word> provisional() const override {
    if (pending_ == 0) return {};
    Word w;
    w.text = " tock";
    w.start = next_start_;
    w.end = end_;
    return {w};
  }
  std::vector<Word> hypothesis() const override {
    std::vector<Word> all = committed_;
    for (const Word& w : provisional()) all.push_back(w);
    return all;
  }
  ProcessResult start_silence() override { return process(true); }
  void end_silence(double duration, double offset) override {
    (void)duration;
    next_start_ = offset;
  }
  ProcessResult finish() override { return process(true); }
  void warmup() override {}
  std::string language() const override { return language_; }

 private:
  static constexpr size_t kTick = 8000;  // half a second at 16 kHz

  Word tick() {
    Word w;
    w.text = " tick" + std::to_string(++count_);
    w.start = next_start_;
    w.end = std::min(end_, next_start_ + 0.5);
    w.language = language_;
    w.probability = 1.0f;
    next_start_ = w.end;
    committed_.push_back(w);
    return w;
  }

  std::string language_;
  size_t pending_ = 0;
  double end_ = 0, next_start_ = 0;
  int count_ = 0;
  std::vector<Word> committed_;
};

class TicksEngine : public Engine {
 public:
  TicksEngine() {
    capabilities_.family = "ticks";
    capabilities_.model_name = "ticks-test";
    capabilities_.multilingual = true;
    capabilities_.languages = {"en", "de"};
    capabilities_.frames_per_second = 12.5;
    capabilities_.policies = {"native"};
  }
  const Capabilities& capabilities() const override { return capabilities_; }
  std::unique_ptr<OnlineProcessor> open_stream(const StreamRequest& request) const override {
    resolve_policy(request.policy);
    const std::string problem = language_problem(request.language);
    if (!problem.empty()) throw Error(ErrorCode::kInvalidArgument, problem);
    if (request.on_pass) request.on_pass(ModelPass::kEncoder, std::chrono::nanoseconds(1));
    return std::make_unique<TicksProcessor>(request.language == "auto" ? "en" : request.language);
  }

 private:
  Capabilities capabilities_;
};

inline void register_ticks_family() {
  Family ticks;
  ticks.name = "ticks";
  ticks.accepts = [](const ModelFile& f) { return f.architecture == kTicksArchitecture; };
  ticks.load = [](const ModelSpec&) { return std::make_shared<const TicksEngine>(); };
  register_family(std::move(ticks));
}

// A GGUF file with just the architecture key (and `extra` keys when given).
inline void write_gguf_with_architecture(const std::filesystem::path& path, const std::string& architecture) {
  gguf_context* ctx = gguf_init_empty();
  if (!architecture.empty()) gguf_set_val_str(ctx, "general.architecture", architecture.c_str());
  const bool ok = gguf_write_to_file(ctx, path.string().c_str(), /*only_meta=*/false);
  gguf_free(ctx);
  if (!ok) throw Error(ErrorCode::kIo, "cannot write " + path.string());
}

}  // namespace earshot::engine::testing
