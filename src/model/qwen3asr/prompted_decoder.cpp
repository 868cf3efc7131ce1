#include "model/qwen3asr/prompted_decoder.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "model/qwen3asr/model_writer.h"

namespace earshot::qwen3asr {

std::vector<Head> load_alignment_heads(const std::filesystem::path& path, int max_heads) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kIo, "cannot read the alignment heads file " + path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::kInvalidModel, "alignment heads file " + path.string() + ": " + why +
                                              " (expected {\"alignment_heads_compact\": [[layer, head], ...]})");
  };
  size_t at = text.find("\"alignment_heads_compact\"");
  if (at == std::string::npos) fail("no alignment_heads_compact");
  at = text.find('[', at);
  if (at == std::string::npos) fail("alignment_heads_compact is not a list");
  // A list of [int, int] pairs: read numbers two by two until the outer list closes.
  std::vector<Head> heads;
  int depth = 0;
  std::vector<int> pair;
  for (size_t i = at; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '[') {
      if (++depth > 2) fail("nested deeper than [[layer, head]]");
      pair.clear();
    } else if (c == ']') {
      if (depth == 2) {
        if (pair.size() != 2) fail("an entry is not [layer, head]");
        heads.emplace_back(pair[0], pair[1]);
      }
      if (--depth == 0) break;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      if (depth != 2) fail("a number outside [layer, head]");
      size_t end = i;
      while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
      pair.push_back(std::stoi(text.substr(i, end - i)));
      i = end - 1;
    } else if (c != ',' && !std::isspace(static_cast<unsigned char>(c))) {
      fail(std::string("unexpected '") + c + "'");
    }
  }
  if (depth != 0) fail("the list is not closed");
  if (heads.empty()) fail("the list is empty");
  if (static_cast<int>(heads.size()) > max_heads) heads.resize(static_cast<size_t>(max_heads));
  return heads;
}

std::vector<Head> default_alignment_heads(int n_layer, int n_head, int max_heads) {
  std::vector<Head> heads;
  for (int l = n_layer * 3 / 4; l < n_layer; ++l) {
    for (int h = 0; h < n_head && static_cast<int>(heads.size()) < max_heads; ++h) heads.emplace_back(l, h);
  }
  return heads;
}

PromptedDecoder::PromptedDecoder(std::shared_ptr<const Model> model, std::vector<Head> heads, int n_ctx,
                                 std::shared_ptr<SharedContext> shared)
    : model_(model), session_(std::move(model), std::move(heads), n_ctx, std::move(shared)) {}

int32_t PromptedDecoder::prefill(const PromptedRequest& request) {
  PromptSpec p;
  p.context = request.context;
  p.language = request.language.empty() ? "" : language_name(request.language);
  p.prefix_tokens = request.prefix_tokens;
  return session_.prefill(p);
}

int32_t PromptedDecoder::text_marker() const { return kAsrText; }

std::string PromptedDecoder::language_of_header(const std::string& header) const {
  // "language English" (leading or trailing spaces tolerated).
  std::string h = header;
  while (!h.empty() && std::isspace(static_cast<unsigned char>(h.back()))) h.pop_back();
  const std::string prefix = "language ";
  const size_t at = h.find(prefix);
  if (at == std::string::npos) return "";
  return language_code(h.substr(at + prefix.size()));
}

}  // namespace earshot::qwen3asr
