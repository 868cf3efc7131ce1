// earshot-fastconformer-encode: runs a FastConformer transducer's encoder on a
// raw mel ([frames][n_mels] little-endian f32) and writes the encoder output (raw
// f32 [frames][d_model]) and the greedy emissions ("token frame" lines), offline
// or through the streaming encoder, for tests/model/reference/. A prompt model
// (Nemotron 3.5) given --language writes the prompt kernel's output instead (the
// joint's input) and decodes that.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "common/error.h"
#include "model/fastconformer/encoder.h"
#include "model/fastconformer/model.h"
#include "model/fastconformer/streaming_encoder.h"
#include "model/runtime/device.h"
#include "model/transducer/decoder.h"
#include "tools/common/tool_args.h"

namespace fc = earshot::fastconformer;
using earshot::Error;
using earshot::ErrorCode;

namespace {

const char* kUsage =
    "usage: earshot-fastconformer-encode --model M.gguf --mel MEL.f32 --out ENC.f32 [--emissions E.txt]\n"
    "                                    [--right-context R] [--streaming 1] [--threads N] [--language L|auto]\n"
    "\n"
    "MEL.f32: [frames][n_mels] f32. ENC.f32: [frames][d_model] f32. E.txt: one 'token frame' line per\n"
    "greedy emission. --streaming 1: through the cache-aware StreamingEncoder, 7 mel frames at a time.\n"
    "--language: a prompt model's language slot (ENC.f32 is then the prompt kernel's output).\n";

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string model_path, mel_path, out_path, emissions_path, language;
    std::optional<int> right;
    bool streaming = false;
    int threads = 1;
    earshot::tools::parse_options(argc, argv, kUsage,
                                  {{"--model", [&](const std::string& v) { model_path = v; }},
                                   {"--mel", [&](const std::string& v) { mel_path = v; }},
                                   {"--out", [&](const std::string& v) { out_path = v; }},
                                   {"--emissions", [&](const std::string& v) { emissions_path = v; }},
                                   {"--right-context", [&](const std::string& v) { right = std::stoi(v); }},
                                   {"--streaming", [&](const std::string& v) { streaming = v == "1"; }},
                                   {"--threads", [&](const std::string& v) { threads = std::stoi(v); }},
                                   {"--language", [&](const std::string& v) { language = v; }}});
    if (model_path.empty() || mel_path.empty() || out_path.empty()) throw Error(ErrorCode::kInvalidArgument, kUsage);
    const auto model = fc::Model::load(model_path);
    const int n_mels = model->hparams().n_mels;
    std::ifstream raw(mel_path, std::ios::binary | std::ios::ate);
    const std::streamsize bytes = raw.tellg();
    if (!raw) throw Error(ErrorCode::kIo, "cannot read " + mel_path);
    if (bytes <= 0 || bytes % (4 * n_mels) != 0)
      throw Error(ErrorCode::kInvalidArgument, mel_path + " is not [frames][" + std::to_string(n_mels) + "] f32");
    std::vector<float> mel(static_cast<size_t>(bytes / 4));
    raw.seekg(0);
    raw.read(reinterpret_cast<char*>(mel.data()), bytes);
    const int n_frames = static_cast<int>(mel.size() / n_mels);

    ggml_backend_ptr backend = earshot::runtime::create_backend(nullptr, threads);
    fc::EncoderOutput enc;
    if (streaming) {
      fc::StreamingEncoder encoder(model, backend.get(), {.right_context = right});
      auto append = [&](const fc::EncoderOutput& part) {
        enc.data.insert(enc.data.end(), part.data.begin(), part.data.end());
        enc.n_frames += part.n_frames;
      };
      for (int at = 0; at < n_frames; at += 7) {
        const int n = std::min(7, n_frames - at);
        append(encoder.push(
            std::span<const float>(mel).subspan(static_cast<size_t>(at) * n_mels, static_cast<size_t>(n) * n_mels), n));
      }
      append(encoder.finish());
    } else {
      enc = fc::Encoder(model, backend.get(), {.right_context = right}).encode(mel, n_frames);
    }
    earshot::transducer::Decoder decoder(&model->decoder_weights());
    if (!language.empty())
      enc.data = decoder.apply_prompt(enc.data, enc.n_frames, fc::prompt_slot(model->hparams(), language));
    std::ofstream out(out_path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(enc.data.data()), static_cast<std::streamsize>(enc.data.size() * 4));
    if (!out) throw Error(ErrorCode::kIo, "cannot write " + out_path);
    if (!emissions_path.empty()) {
      earshot::transducer::DecoderState state = decoder.initial_state();
      std::vector<earshot::transducer::Emission> emissions;
      decoder.greedy(decoder.project_encoder(enc.data, enc.n_frames), enc.n_frames, state, emissions);
      std::ofstream e(emissions_path);
      for (const auto& emission : emissions) e << emission.token << " " << emission.frame << "\n";
      if (!e) throw Error(ErrorCode::kIo, "cannot write " + emissions_path);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-fastconformer-encode: %s\n", e.what());
    return 1;
  }
}
