// Writes a random-weight LLM and what LlamaSession computes on it, for the numpy
// reference (scripts/llm_reference/check_llama.py) to recompute independently:
//   earshot-llm-reference-dump ARCH OUT_DIR
// OUT_DIR/model.gguf (F32 weights), OUT_DIR/weights.gguf (its tensors and
// architecture keys, no vocabulary), OUT_DIR/steps.json (the decode calls: tokens,
// positions, the captured heads and span), OUT_DIR/logits.f32 (n_vocab floats per
// step: the last token's logits), OUT_DIR/attention.f32 (per step [token][head][column]).
// The session runs with an F32 KV cache, so the comparison can be tight.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "llm_test_models.h"
#include "model/llm/llama_backend.h"
#include "model/runtime/gguf_file.h"

namespace {

using namespace earshot::llm;

// model.gguf without its tokenizer keys: the same tensor bytes, which the numpy
// reference reads in a fraction of a second (gguf-py parses a 150k-entry
// vocabulary in pure Python, for ten seconds and more).
void write_weights_only(const std::filesystem::path& model, const std::filesystem::path& out) {
  const earshot::runtime::GgufFile file = earshot::runtime::GgufFile::open(model);
  earshot::runtime::GgufWriter writer;
  for (const std::string& key : file.keys()) {
    if (key.starts_with("tokenizer.")) continue;
    switch (*file.key_type(key)) {
      case earshot::runtime::MetaType::kString: writer.set(key, file.get<std::string>(key)); break;
      case earshot::runtime::MetaType::kU32: writer.set(key, file.get<uint32_t>(key)); break;
      case earshot::runtime::MetaType::kF32: writer.set(key, file.get<float>(key)); break;
      default: break;  // the generator writes no other kinds of keys
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

void append(std::ofstream& out, const std::vector<float>& values) {
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: earshot-llm-reference-dump hunyuan-dense|qwen3 OUT_DIR\n");
    return 2;
  }
  try {
    const std::string arch = argv[1];
    const std::filesystem::path dir = argv[2];
    std::filesystem::create_directories(dir);
    const std::filesystem::path model_path = dir / "model.gguf";
    write_random_llm(testing::tiny_spec(arch), model_path);
    write_weights_only(model_path, dir / "weights.gguf");
    LlamaModelOptions options;
    options.cache_type = GGML_TYPE_F32;
    options.threads = 2;
    auto model = LlamaModel::load(model_path, options);
    const ModelShape shape = model->shape();
    auto session = model->open_session({.context_tokens = 64, .threads = 2});
    const std::vector<AttentionHead> heads = {{0, 1}, {1, 3}, {shape.n_layer - 1, 0}};
    const int column_begin = 2, column_end = 14;
    session->set_attention_capture(heads, column_begin, column_end);

    // A prompt, teacher-forced single steps, then a suffix removal and a re-draft.
    const std::vector<Token> prompt = model->tokenize("Translate: 会议九点开始。 The meeting", false);
    std::vector<std::vector<Token>> calls = {prompt};
    for (Token t : model->tokenize(" starts at nine", false)) calls.push_back({t});
    const int keep = static_cast<int>(prompt.size()) + 1;
    const std::vector<Token> redraft = model->tokenize(" begins", false);

    std::ofstream logits(dir / "logits.f32", std::ios::binary);
    std::ofstream attention(dir / "attention.f32", std::ios::binary);
    std::string steps;
    auto run = [&](const std::vector<Token>& tokens) {
      const int position = session->position();
      const AttentionRows rows = session->decode(tokens);
      const std::span<const float> last = dynamic_cast<LlamaSession&>(*session).last_logits();
      append(logits, std::vector<float>(last.begin(), last.end()));
      append(attention, rows.values);
      std::string list;
      for (Token t : tokens) list += (list.empty() ? "" : ", ") + std::to_string(t);
      steps += std::string(steps.empty() ? "" : ",\n") + "    {\"position\": " + std::to_string(position) +
               ", \"tokens\": [" + list + "]}";
    };
    for (const auto& call : calls) run(call);
    session->remove_suffix(keep);
    run(redraft);

    std::string head_list;
    for (const AttentionHead& h : heads)
      head_list += (head_list.empty() ? "[" : ", [") + std::to_string(h.layer) + ", " + std::to_string(h.head) + "]";
    std::ofstream(dir / "steps.json") << "{\n  \"architecture\": \"" << arch << "\",\n  \"n_vocab\": " << shape.n_vocab
                                      << ",\n  \"heads\": [" << head_list << "],\n  \"column_begin\": " << column_begin
                                      << ",\n  \"column_end\": " << column_end << ",\n  \"steps\": [\n"
                                      << steps << "\n  ]\n}\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-llm-reference-dump: %s\n", e.what());
    return 1;
  }
}
