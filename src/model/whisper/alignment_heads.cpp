#include "model/whisper/alignment_heads.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/error.h"

namespace earshot::whisper {
namespace {

struct Preset {
  std::string_view name;
  std::vector<AlignmentHead> heads;
};

// openai-whisper's per-release heads (../shared/docs/alignatt.md), 0-based (layer, head).
const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = {
      {"tiny.en", {{1, 0}, {2, 0}, {2, 5}, {3, 0}, {3, 1}, {3, 2}, {3, 3}, {3, 4}}},
      {"tiny", {{2, 2}, {3, 0}, {3, 2}, {3, 3}, {3, 4}, {3, 5}}},
      {"base.en", {{3, 3}, {4, 7}, {5, 1}, {5, 5}, {5, 7}}},
      {"base", {{3, 1}, {4, 2}, {4, 3}, {4, 7}, {5, 1}, {5, 2}, {5, 4}, {5, 6}}},
      {"small.en",
       {{6, 6},
        {7, 0},
        {7, 3},
        {7, 8},
        {8, 2},
        {8, 5},
        {8, 7},
        {9, 0},
        {9, 4},
        {9, 8},
        {9, 10},
        {10, 0},
        {10, 1},
        {10, 2},
        {10, 3},
        {10, 6},
        {10, 11},
        {11, 2},
        {11, 4}}},
      {"small", {{5, 3}, {5, 9}, {8, 0}, {8, 4}, {8, 7}, {8, 8}, {9, 0}, {9, 7}, {9, 9}, {10, 5}}},
      {"medium.en",
       {{11, 4},
        {14, 1},
        {14, 12},
        {14, 14},
        {15, 4},
        {16, 0},
        {16, 4},
        {16, 9},
        {17, 12},
        {17, 14},
        {18, 7},
        {18, 10},
        {18, 15},
        {20, 0},
        {20, 3},
        {20, 9},
        {20, 14},
        {21, 12}}},
      {"medium", {{13, 15}, {15, 4}, {15, 15}, {16, 1}, {20, 0}, {23, 4}}},
      {"large-v1", {{9, 19}, {11, 2}, {11, 4}, {11, 17}, {22, 7}, {22, 11}, {22, 17}, {23, 2}, {23, 15}}},
      {"large-v2", {{10, 12}, {13, 17}, {16, 11}, {16, 12}, {16, 13}, {17, 15}, {17, 16}, {18, 4},
                    {18, 11}, {18, 19}, {19, 11}, {21, 2},  {21, 3},  {22, 3},  {22, 9},  {22, 12},
                    {23, 5},  {23, 7},  {23, 13}, {25, 5},  {26, 1},  {26, 12}, {27, 15}}},
      {"large-v3", {{7, 0}, {10, 17}, {12, 18}, {13, 12}, {16, 1}, {17, 14}, {19, 11}, {21, 4}, {24, 1}, {25, 6}}},
      {"large-v3-turbo", {{2, 4}, {2, 11}, {3, 3}, {3, 6}, {3, 11}, {3, 14}}},
  };
  return table;
}

struct SizeShape {
  std::string_view name;
  int32_t state, heads, layers;
};
constexpr SizeShape kSizes[] = {
    {"tiny", 384, 6, 4}, {"base", 512, 8, 6}, {"small", 768, 12, 12}, {"medium", 1024, 16, 24}, {"large", 1280, 20, 32},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<AlignmentHead> alignment_heads_preset(std::string_view size_name) {
  for (const Preset& preset : presets()) {
    if (preset.name == size_name) return preset.heads;
  }
  return {};
}

std::string model_size_name(const Hparams& h) {
  if (h.n_audio_ctx != 1500 || h.n_text_ctx != 448 || h.n_audio_state != h.n_text_state ||
      h.n_audio_head != h.n_text_head) {
    return "";
  }
  for (const SizeShape& size : kSizes) {
    if (h.n_audio_state != size.state || h.n_audio_head != size.heads || h.n_audio_layer != size.layers) continue;
    const std::string base(size.name);
    if (base != "large") {
      if (h.n_text_layer != size.layers || h.n_mels != 80) return "";
      if (h.n_vocab == 51864) return base + ".en";
      return h.n_vocab == 51865 ? base : "";
    }
    // large-v1 and large-v2 have identical shapes; v2 is the one in use (and its heads
    // are the better guess for fine-tunes of either), so the shape means v2.
    if (h.n_vocab == 51865 && h.n_mels == 80 && h.n_text_layer == 32) return "large-v2";
    if (h.n_vocab == 51866 && h.n_mels == 128 && h.n_text_layer == 32) return "large-v3";
    if (h.n_vocab == 51866 && h.n_mels == 128 && h.n_text_layer == 4) return "large-v3-turbo";
    return "";
  }
  return "";
}

std::vector<AlignmentHead> default_alignment_heads(const Hparams& h) {
  std::vector<AlignmentHead> heads = alignment_heads_preset(model_size_name(h));
  if (!heads.empty()) return heads;
  for (int layer = h.n_text_layer / 2; layer < h.n_text_layer; ++layer) {
    for (int head = 0; head < h.n_text_head; ++head) heads.push_back({layer, head});
  }
  return heads;
}

std::vector<AlignmentHead> parse_alignment_heads(std::string_view text, const Hparams& h) {
  auto fail = [&](const std::string& why) -> Error {
    return Error(ErrorCode::kInvalidArgument,
                 "alignment heads \"" + std::string(text) + "\": " + why + " (expected \"layer,head;layer,head;...\")");
  };
  auto parse_int = [&](std::string_view part) {
    part = trim(part);
    int value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size()) {
      throw fail("'" + std::string(part) + "' is not a number");
    }
    return value;
  };
  std::vector<AlignmentHead> heads;
  std::string_view rest = text;
  while (!trim(rest).empty()) {
    const size_t semicolon = rest.find(';');
    const std::string_view item = trim(rest.substr(0, semicolon));
    rest = semicolon == std::string_view::npos ? std::string_view() : rest.substr(semicolon + 1);
    if (item.empty()) throw fail("empty entry");
    const size_t comma = item.find(',');
    if (comma == std::string_view::npos) throw fail("entry '" + std::string(item) + "' has no comma");
    const AlignmentHead head{parse_int(item.substr(0, comma)), parse_int(item.substr(comma + 1))};
    if (head.layer < 0 || head.layer >= h.n_text_layer) {
      throw fail("layer " + std::to_string(head.layer) + " is outside 0.." + std::to_string(h.n_text_layer - 1));
    }
    if (head.head < 0 || head.head >= h.n_text_head) {
      throw fail("head " + std::to_string(head.head) + " is outside 0.." + std::to_string(h.n_text_head - 1));
    }
    if (std::find(heads.begin(), heads.end(), head) != heads.end()) {
      throw fail("(" + std::to_string(head.layer) + "," + std::to_string(head.head) + ") is listed twice");
    }
    heads.push_back(head);
  }
  if (heads.empty()) throw fail("no heads given");
  return heads;
}

}  // namespace earshot::whisper
