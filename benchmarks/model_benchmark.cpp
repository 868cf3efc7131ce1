// Beam search reorders the self-attention KV cache after every decoder step
// (Session::reorder, a get_rows/cpy graph on the session's backend). Measured at
// tiny.en's text dimensions (4 layers x 384) against a decoder step, which costs
// a few milliseconds there (earshot-bench-model).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <vector>

#include "model/whisper/model_format.h"
#include "model/whisper/model_writer.h"
#include "model/whisper/session.h"

namespace {

using namespace earshot;
namespace fs = std::filesystem;

std::shared_ptr<const whisper::Model> tiny_text_model() {
  static std::shared_ptr<const whisper::Model> model = [] {
    whisper::RandomModelSpec spec;
    spec.template_path = fs::path(EARSHOT_SHARED_DIR) / "models/for-tests-ggml-tiny.en.bin";
    spec.hparams = whisper::read_file_header(spec.template_path).hparams;  // text 4 x 384, 6 heads
    spec.hparams.n_audio_ctx = 100;  // the encoder does not matter here: keep it small
    spec.hparams.n_audio_layer = 1;
    const fs::path file = fs::temp_directory_path() / ("earshot-bench-model-" + std::to_string(::getpid()) + ".bin");
    whisper::write_random_model(spec, file);
    auto loaded = whisper::Model::load(file);
    fs::remove(file);
    return loaded;
  }();
  return model;
}

// args: beams, tokens in the cache.
void BM_KvReorder(benchmark::State& state) {
  const int beams = static_cast<int>(state.range(0)), n_past = static_cast<int>(state.range(1));
  whisper::SessionOptions options;
  options.n_threads = 2;
  whisper::Session session(tiny_text_model(), options);
  session.encode(std::vector<float>(16000, 0.0f));
  session.reset(beams);
  DecodeRequest prefill;
  prefill.want_attention = false;
  for (int b = 0; b < beams; ++b) {
    std::vector<int32_t> tokens(n_past);
    std::iota(tokens.begin(), tokens.end(), 1000 + 7 * b);
    prefill.tokens.push_back(std::move(tokens));
  }
  session.decode(prefill);
  std::vector<int> source(beams);
  for (int b = 0; b < beams; ++b) source[b] = (b + 1) % beams;  // every beam moves
  for (auto _ : state) session.reorder(source);
}
BENCHMARK(BM_KvReorder)->Args({3, 64})->Args({5, 64})->Args({5, 200})->Unit(benchmark::kMicrosecond);

}  // namespace
