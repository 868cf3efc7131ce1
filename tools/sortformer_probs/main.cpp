// earshot-sortformer-probs: runs a Sortformer GGUF on raw 16 kHz samples (f32) or a
// raw NeMo mel ([frames][n_mels] f32), offline or through sortformer::Stream, and
// writes the probabilities (raw f32 [frames][speakers]) and, streamed, the state
// after every chunk, for tests/model/reference/sortformer_reference.py:
//
//   per chunk: i32 index, first_frame, n_frames, n_cache, has_cache_preds, n_fifo,
//   compressions, i64 n_sil_frames; f32 preds [n_frames][S], cache [n_cache][d],
//   cache_preds [n_cache][S] (when has_cache_preds), fifo [n_fifo][d],
//   fifo_preds [n_fifo][S], mean_sil_emb [d]
//
// --bench N: prints the compute per audio second (the best of N runs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "common/error.h"
#include "model/runtime/openblas_ops.h"
#include "model/sortformer/model.h"
#include "model/sortformer/stream.h"
#include "tools/common/tool_args.h"

namespace sf = earshot::sortformer;
using earshot::Error;
using earshot::ErrorCode;

namespace {

const char* kUsage =
    "usage: earshot-sortformer-probs --model M.gguf (--mel MEL.f32 | --audio PCM.f32) --out P.f32\n"
    "           [--streaming 1] [--states S.bin] [--piece N] [--chunk N] [--left N] [--right N]\n"
    "           [--spkcache N] [--fifo N] [--update N] [--async 0|1] [--threads N]\n"
    "           [--cpu-kernels ggml|openblas|auto]\n"
    "           [--bench N]\n"
    "\n"
    "MEL.f32: [frames][n_mels] f32; PCM.f32: 16 kHz mono f32. P.f32: [frames][speakers] f32.\n"
    "--streaming 1: through sortformer::Stream, pushed N mel frames (or N samples) at a time (--piece,\n"
    "default 7 frames / 1234 samples). --bench N: time N runs, print compute per audio second.\n";

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error(ErrorCode::kIo, "cannot read " + path);
  const std::streamsize bytes = in.tellg();
  if (bytes % 4 != 0) throw Error(ErrorCode::kInvalidArgument, path + " is not raw f32");
  std::vector<float> v(static_cast<size_t>(bytes / 4));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), bytes);
  return v;
}

template <typename T>
void put(std::ofstream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(v));
}
void put(std::ofstream& out, const float* data, size_t n) {
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(float)));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string model_path, mel_path, audio_path, out_path, states_path;
    bool streaming = false;
    int piece = 0, bench = 0;
    sf::StreamOptions so;
    std::string kernels = "ggml";
    earshot::tools::parse_options(argc, argv, kUsage,
                                  {{"--model", [&](const std::string& v) { model_path = v; }},
                                   {"--mel", [&](const std::string& v) { mel_path = v; }},
                                   {"--audio", [&](const std::string& v) { audio_path = v; }},
                                   {"--out", [&](const std::string& v) { out_path = v; }},
                                   {"--states", [&](const std::string& v) { states_path = v; }},
                                   {"--streaming", [&](const std::string& v) { streaming = v == "1"; }},
                                   {"--piece", [&](const std::string& v) { piece = std::stoi(v); }},
                                   {"--chunk", [&](const std::string& v) { so.chunk_frames = std::stoi(v); }},
                                   {"--left", [&](const std::string& v) { so.left_context = std::stoi(v); }},
                                   {"--right", [&](const std::string& v) { so.right_context = std::stoi(v); }},
                                   {"--spkcache", [&](const std::string& v) { so.spkcache_len = std::stoi(v); }},
                                   {"--fifo", [&](const std::string& v) { so.fifo_len = std::stoi(v); }},
                                   {"--update", [&](const std::string& v) { so.update_period = std::stoi(v); }},
                                   {"--async", [&](const std::string& v) { so.async_update = std::stoi(v); }},
                                   {"--threads", [&](const std::string& v) { so.run.threads = std::stoi(v); }},
                                   {"--cpu-kernels", [&](const std::string& v) { kernels = v; }},
                                   {"--bench", [&](const std::string& v) { bench = std::stoi(v); }}});
    if (model_path.empty() || out_path.empty() || mel_path.empty() == audio_path.empty())
      throw Error(ErrorCode::kInvalidArgument, kUsage);
    so.run.cpu_kernels = earshot::runtime::parse_cpu_kernels(kernels, "--cpu-kernels");
    const auto model = sf::Model::load(model_path);
    const sf::Hparams& hp = model->hparams();
    const int n_mels = hp.encoder.n_mels, S = hp.n_speakers, d = hp.encoder.n_state;
    const bool from_mel = !mel_path.empty();
    const std::vector<float> input = read_floats(from_mel ? mel_path : audio_path);
    if (from_mel && input.size() % n_mels != 0)
      throw Error(ErrorCode::kInvalidArgument, mel_path + " is not [frames][" + std::to_string(n_mels) + "] f32");
    const int n_mel = static_cast<int>(input.size() / n_mels);
    if (piece <= 0) piece = from_mel ? 7 : 1234;

    std::vector<float> probs;
    auto run_once = [&] {
      probs.clear();
      if (!streaming) {
        const sf::FrameProbabilities p = from_mel ? sf::frame_probabilities_from_mel(*model, input, n_mel, so.run)
                                                  : sf::frame_probabilities(*model, input, so.run);
        probs = p.data;
        return;
      }
      std::ofstream states;
      if (!states_path.empty()) states.open(states_path, std::ios::binary);
      sf::Stream stream(*model, so);
      stream.set_chunk_observer([&](const sf::ChunkInfo& c) {
        probs.insert(probs.end(), c.preds.begin(), c.preds.end());
        if (!states.is_open()) return;
        const sf::AoscState& s = *c.state;
        for (int v :
             {c.index, c.first_frame, c.n_frames, s.n_cache, s.has_cache_preds ? 1 : 0, s.n_fifo, s.compressions})
          put<int32_t>(states, v);
        put<int64_t>(states, s.n_sil_frames);
        put(states, c.preds.data(), c.preds.size());
        put(states, s.cache.data(), static_cast<size_t>(s.n_cache) * d);
        if (s.has_cache_preds) put(states, s.cache_preds.data(), static_cast<size_t>(s.n_cache) * S);
        put(states, s.fifo.data(), static_cast<size_t>(s.n_fifo) * d);
        put(states, s.fifo_preds.data(), static_cast<size_t>(s.n_fifo) * S);
        put(states, s.mean_sil_emb.data(), static_cast<size_t>(d));
      });
      if (from_mel) {
        for (int at = 0; at < n_mel; at += piece) {
          const int n = std::min(piece, n_mel - at);
          stream.push_features(
              std::span<const float>(input).subspan(static_cast<size_t>(at) * n_mels, static_cast<size_t>(n) * n_mels),
              n);
        }
      } else {
        for (size_t at = 0; at < input.size(); at += static_cast<size_t>(piece))
          stream.push(std::span<const float>(input).subspan(at, std::min<size_t>(piece, input.size() - at)));
      }
      stream.finish();
    };
    double best = 1e30;
    for (int i = 0; i < std::max(bench, 1); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      run_once();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::ofstream out(out_path, std::ios::binary);
    put(out, probs.data(), probs.size());
    if (!out) throw Error(ErrorCode::kIo, "cannot write " + out_path);
    if (bench > 0) {
      const double audio = from_mel ? n_mel * hp.encoder.hop_length / static_cast<double>(hp.encoder.sample_rate)
                                    : input.size() / static_cast<double>(hp.encoder.sample_rate);
      std::printf("%s %s, %d threads, %s: %.1f s of audio in %.3f s: %.3f s compute per audio second\n",
                  model_path.c_str(), streaming ? "streamed" : "offline", so.run.threads, kernels.c_str(), audio, best,
                  best / audio);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-sortformer-probs: %s\n", e.what());
    return 1;
  }
}
