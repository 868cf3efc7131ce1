// Writes a random-weight Qwen3-ASR pair (F32 weights) and what our model code
// computes on it through libmtmd + libllama, for the independent numpy reference
// (scripts/llm_reference/check_qwen3asr.py) to recompute:
//   earshot-qwen3asr-reference-dump OUT_DIR [--size tiny|0.6b]
// (0.6b: real Qwen3-ASR-0.6B dimensions, ~7 GB of files, for a check by hand.)
// OUT_DIR: pair.gguf / pair-mmproj.gguf (the pair), text-weights.gguf (the text
// model's tensors and architecture keys, no vocabulary: gguf-py parses a
// 150k-entry vocabulary for many seconds), audio_<name>.f32 (16 kHz PCM),
// embd_<name>.f32 (Session::audio_embeddings; embd_<name>_hf.f32 with Hugging
// Face's mel frame count, MelFrames::kHf), logits.f32 (n_vocab floats per
// decode call: the prefill, then each teacher-forced step), rows.f32 (per step,
// per alignment head, the captured attention row over cells 0..position),
// dump.json (token ids, positions, heads, counts). F32 KV cache, so the
// comparison can be tight.
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "model/qwen3asr/model.h"
#include "model/qwen3asr/model_writer.h"
#include "model/runtime/gguf_file.h"

namespace {

using namespace earshot::qwen3asr;
namespace fs = std::filesystem;

void write_weights_only(const fs::path& model, const fs::path& out) {
  const earshot::runtime::GgufFile file = earshot::runtime::GgufFile::open(model);
  earshot::runtime::GgufWriter writer;
  for (const std::string& key : file.keys()) {
    if (key.starts_with("tokenizer.")) continue;
    switch (*file.key_type(key)) {
      case earshot::runtime::MetaType::kString: writer.set(key, file.get<std::string>(key)); break;
      case earshot::runtime::MetaType::kU32: writer.set(key, file.get<uint32_t>(key)); break;
      case earshot::runtime::MetaType::kF32: writer.set(key, file.get<float>(key)); break;
      default: break;  // the rope sections (an array): the reference gives every section the same position
    }
  }
  std::ifstream in(model, std::ios::binary);
  for (const earshot::runtime::GgufTensor& t : file.tensors()) {
    std::vector<uint8_t> bytes(t.n_bytes);
    in.seekg(static_cast<std::streamoff>(t.offset));
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    writer.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne.data(), static_cast<std::size_t>(t.n_dims)), bytes);
  }
  writer.write(out);
}

void write_floats(const fs::path& path, const std::vector<float>& values, bool append = false) {
  std::ofstream out(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
}

// A rising tone with noise: every mel chunk differs, so the encoder's tokens do too.
std::vector<float> audio(double seconds, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.02f);
  std::vector<float> pcm(static_cast<size_t>(seconds * 16000));
  double phase = 0;
  for (size_t i = 0; i < pcm.size(); ++i) {
    phase += 2 * M_PI * (200.0 + 300.0 * static_cast<double>(i) / 16000.0) / 16000.0;
    pcm[i] = 0.3f * static_cast<float>(std::sin(phase)) + noise(rng);
  }
  return pcm;
}

std::string ints(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return "[" + s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  const bool real = argc == 4 && std::string(argv[2]) == "--size" && std::string(argv[3]) == "0.6b";
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--size" && (real || std::string(argv[3]) == "tiny"))) {
    std::fprintf(stderr, "usage: earshot-qwen3asr-reference-dump OUT_DIR [--size tiny|0.6b]\n");
    return 2;
  }
  try {
    const fs::path dir = argv[1];
    fs::create_directories(dir);
    PairDims dims = real ? PairDims::real_0_6b() : PairDims::tiny();
    dims.f32_weights = true;
    const WrittenPair pair = write_random_pair(dims, EARSHOT_QWEN2_VOCAB, dir / "pair", 7);
    write_weights_only(pair.text, dir / "text-weights.gguf");
    ModelOptions options;
    options.f32_kv_cache = true;
    // 8 s: one whole 800-frame window (mtmd's first window is the reference's);
    // 3 s: a partial window, where mtmd's padding tokens join the attention.
    const std::pair<std::string, double> audios[] = {{"8s", 8.0}, {"3s", 3.0}};
    std::string audio_json, hf_json;
    {
      // Hugging Face's mel frame count first, its model freed before the main one loads (0.6b: GBs).
      ModelOptions hf_options = options;
      hf_options.mel_frames = MelFrames::kHf;
      auto hf_model = Model::load(pair.text, pair.mmproj, hf_options);
      Session hf_session(hf_model, {{0, 0}}, 16);
      for (const auto& [name, seconds] : audios) {
        const int n = hf_session.encode(audio(seconds, 11));
        write_floats(dir / ("embd_" + name + "_hf.f32"), hf_session.audio_embeddings());
        hf_json += std::string(hf_json.empty() ? "" : ", ") + "\"" + name + "\": " + std::to_string(n);
      }
    }
    auto model = Model::load(pair.text, pair.mmproj, options);
    // Two heads of the last layer and one of another layer (0.6b: the last quarter's first).
    const std::vector<Head> heads =
        real ? std::vector<Head>{{27, 0}, {27, 15}, {21, 1}} : std::vector<Head>{{3, 0}, {3, 3}, {2, 1}};
    Session session(model, heads, 256);
    for (const auto& [name, seconds] : audios) {
      const std::vector<float> pcm = audio(seconds, 11);
      write_floats(dir / ("audio_" + name + ".f32"), pcm);
      const int n = session.encode(pcm);
      write_floats(dir / ("embd_" + name + ".f32"), session.audio_embeddings());
      audio_json += std::string(audio_json.empty() ? "" : ", ") + "\"" + name + "\": " + std::to_string(n);
    }

    // The decoder on the 3 s audio (kept from the last encode): the prompt, then
    // teacher-forced steps whose alignment-head rows are captured.
    fs::remove(dir / "logits.f32");
    fs::remove(dir / "rows.f32");
    session.prefill({"earlier text", "English", {}});
    write_floats(dir / "logits.f32", session.logits(), true);
    const std::vector<int32_t> forced = model->tokenize(" the quick brown fox jumps", false);
    std::vector<int32_t> positions;
    for (int32_t t : forced) {
      positions.push_back(session.n_past());
      session.step(t);
      write_floats(dir / "logits.f32", session.logits(), true);
      for (size_t k = 0; k < heads.size(); ++k) {
        const auto& row = session.step_rows()[k];
        if (row.size() < static_cast<size_t>(positions.back() + 1)) throw std::runtime_error("short attention row");
        write_floats(dir / "rows.f32", std::vector<float>(row.begin(), row.begin() + positions.back() + 1), true);
      }
    }
    std::string head_list;
    for (const Head& h : heads) {
      head_list += (head_list.empty() ? "[" : ", [") + std::to_string(h.first) + ", " + std::to_string(h.second) + "]";
    }
    std::ofstream(dir / "dump.json") << "{\n  \"n_vocab\": " << model->n_vocab()
                                     << ",\n  \"n_embd\": " << model->n_embd() << ",\n  \"n_audio\": {" << audio_json
                                     << "},\n  \"n_audio_hf\": {" << hf_json
                                     << "},\n  \"decoder_audio\": \"3s\",\n  \"audio_begin\": " << session.audio_begin()
                                     << ",\n  \"prompt\": " << ints(session.prompt_tokens())
                                     << ",\n  \"forced\": " << ints(forced) << ",\n  \"positions\": " << ints(positions)
                                     << ",\n  \"heads\": [" << head_list << "]\n}\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-qwen3asr-reference-dump: %s\n", e.what());
    return 1;
  }
}
