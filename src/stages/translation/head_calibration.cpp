#include "stages/translation/head_calibration.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "stages/translation/engine.h"

namespace earshot::stages::translation {

namespace {

struct Span {
  size_t begin = 0, end = 0;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::vector<Span> words_of(const std::string& text) {
  std::vector<Span> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    if (i >= text.size()) break;
    const size_t b = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    out.push_back({b, i});
  }
  return out;
}

// Byte ranges of `tokens` within `text`, or false when their bytes do not spell
// it (a tokenizer may put a space before the text: that prefix maps to 0).
bool token_spans(const llm::LlmModel& model, const std::vector<llm::Token>& tokens, const std::string& text,
                 std::vector<Span>* out) {
  std::string pieces;
  std::vector<size_t> ends;
  for (llm::Token t : tokens) {
    pieces += model.token_bytes(t);
    ends.push_back(pieces.size());
  }
  if (!pieces.ends_with(text)) return false;
  const size_t offset = pieces.size() - text.size();
  size_t start = 0;
  out->clear();
  for (size_t e : ends) {
    out->push_back({start > offset ? start - offset : 0, e > offset ? e - offset : 0});
    start = e;
  }
  return true;
}

std::string pair_label(size_t index, const CalibrationPair& p) {
  std::string s = p.source.substr(0, 40);
  return "pair " + std::to_string(index + 1) + " (\"" + s + (p.source.size() > 40 ? "..." : "") + "\")";
}

}  // namespace

std::vector<std::pair<int, int>> parse_pharaoh(const std::string& text) {
  std::vector<std::pair<int, int>> out;
  std::istringstream in(text);
  std::string link;
  while (in >> link) {
    const size_t dash = link.find('-');
    bool ok = dash != std::string::npos && dash > 0 && dash + 1 < link.size();
    for (size_t i = 0; ok && i < link.size(); ++i) ok = i == dash || std::isdigit(static_cast<unsigned char>(link[i]));
    if (!ok) throw Error(ErrorCode::kInvalidArgument, "alignment link '" + link + "' is not SOURCE-TARGET (e.g. 0-2)");
    out.emplace_back(std::stoi(link.substr(0, dash)), std::stoi(link.substr(dash + 1)));
  }
  return out;
}

std::vector<CalibrationPair> read_calibration_pairs(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, "cannot read the pairs file " + path.string());
  std::vector<CalibrationPair> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line.front() == '#') continue;
    const std::string where = path.string() + ":" + std::to_string(number) + ": ";
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      CalibrationPair p;
      p.source = j.at("source").get<std::string>();
      for (const char* key : {"target", "reference", "translation"})
        if (j.contains(key)) {
          p.target = j[key].get<std::string>();
          break;
        }
      if (p.source.empty() || p.target.empty())
        throw Error(ErrorCode::kInvalidArgument, "needs a non-empty \"source\" and \"target\" (or \"reference\")");
      if (j.contains("alignment")) {
        const auto& a = j["alignment"];
        if (a.is_string()) {
          p.alignment = parse_pharaoh(a.get<std::string>());
        } else {
          for (const auto& link : a) {
            if (!link.is_array() || link.size() != 2)
              throw Error(ErrorCode::kInvalidArgument, "an alignment link is [source word, target word]");
            p.alignment.emplace_back(link[0].get<int>(), link[1].get<int>());
          }
        }
        for (const auto& [s, t] : p.alignment)
          if (s < 0 || t < 0) throw Error(ErrorCode::kInvalidArgument, "alignment word indices start at 0");
      }
      out.push_back(std::move(p));
    } catch (const Error& e) {
      throw Error(ErrorCode::kInvalidArgument, where + e.what());
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kInvalidArgument,
                  where + "not a pair (" + e.what() + "); expected {\"source\": ..., \"target\": ...}");
    }
  }
  return out;
}

HeadCalibration calibrate_heads(const llm::LlmModel& model, const std::vector<CalibrationPair>& pairs,
                                const HeadCalibrationOptions& options) {
  const llm::ModelShape shape = model.shape();
  if (shape.n_layer <= 0 || shape.n_head <= 0)
    throw Error(ErrorCode::kInvalidModel, model.id() + " reports no layers or heads to calibrate");
  std::vector<llm::AttentionHead> heads;
  for (int l = 0; l < shape.n_layer; ++l)
    for (int h = 0; h < shape.n_head; ++h) heads.push_back({l, h});
  const size_t n_heads = heads.size();

  const PromptTemplate tpl = prompt_template(model.architecture(), options.source_language, options.target_language);
  const std::vector<llm::Token> before = model.tokenize(tpl.before_source, true);
  const std::vector<llm::Token> after = model.tokenize(tpl.after_source, true);
  llm::SessionOptions so;
  so.context_tokens = options.context_tokens;
  so.threads = options.threads;
  std::unique_ptr<llm::LlmSession> session = model.open_session(so);

  HeadCalibration result;
  std::vector<double> hits(n_heads, 0), distance(n_heads, 0);
  for (size_t index = 0; index < pairs.size(); ++index) {
    const CalibrationPair& pair = pairs[index];
    const std::vector<llm::Token> src = model.tokenize(pair.source, false);
    const std::vector<llm::Token> tgt = model.tokenize(pair.target, false);
    if (src.empty() || tgt.empty()) {
      result.problems.push_back(pair_label(index, pair) + ": source or target has no tokens; skipped");
      continue;
    }
    // Which source tokens each target token aligns to (empty: not scored).
    std::vector<std::vector<int>> aligned(tgt.size());
    const int n_s = static_cast<int>(src.size()), n_t = static_cast<int>(tgt.size());
    if (pair.alignment.empty()) {
      for (int k = 0; k < n_t; ++k) aligned[static_cast<size_t>(k)] = {static_cast<int>((k + 0.5) * n_s / n_t)};
    } else {
      std::vector<Span> src_spans, tgt_spans;
      if (!token_spans(model, src, pair.source, &src_spans) || !token_spans(model, tgt, pair.target, &tgt_spans)) {
        result.problems.push_back(
            pair_label(index, pair) +
            ": the tokens do not spell the text, so the word alignment cannot be placed; skipped");
        continue;
      }
      const std::vector<Span> src_words = words_of(pair.source), tgt_words = words_of(pair.target);
      bool in_range = true;
      for (const auto& [s, t] : pair.alignment)
        in_range = in_range && s < static_cast<int>(src_words.size()) && t < static_cast<int>(tgt_words.size());
      if (!in_range) {
        result.problems.push_back(pair_label(index, pair) + ": an alignment link names a word past the end (" +
                                  std::to_string(src_words.size()) + " source, " + std::to_string(tgt_words.size()) +
                                  " target words); skipped");
        continue;
      }
      for (int k = 0; k < n_t; ++k) {
        const Span ts = tgt_spans[static_cast<size_t>(k)];
        size_t first = ts.begin;
        while (first < ts.end && is_space(pair.target[first])) ++first;
        if (first >= ts.end) continue;
        int word = -1;
        for (size_t w = 0; w < tgt_words.size(); ++w)
          if (tgt_words[w].begin <= first && first < tgt_words[w].end) word = static_cast<int>(w);
        for (const auto& [s, t] : pair.alignment) {
          if (t != word) continue;
          const Span sw = src_words[static_cast<size_t>(s)];
          for (int j = 0; j < n_s; ++j) {
            const Span ss = src_spans[static_cast<size_t>(j)];
            if (ss.begin < sw.end && ss.end > sw.begin) aligned[static_cast<size_t>(k)].push_back(j);
          }
        }
      }
    }

    std::vector<llm::Token> prompt = before;
    const int source_begin = static_cast<int>(prompt.size());
    prompt.insert(prompt.end(), src.begin(), src.end());
    const int source_end = static_cast<int>(prompt.size());
    prompt.insert(prompt.end(), after.begin(), after.end());
    const int target_begin = static_cast<int>(prompt.size());
    prompt.insert(prompt.end(), tgt.begin(), tgt.end());
    if (static_cast<int>(prompt.size()) > options.context_tokens) {
      result.problems.push_back(pair_label(index, pair) + ": " + std::to_string(prompt.size()) +
                                " tokens do not fit the context of " + std::to_string(options.context_tokens) +
                                "; skipped");
      continue;
    }
    session->remove_suffix(0);
    session->set_attention_capture(heads, source_begin, source_end);
    const llm::AttentionRows rows = session->decode(prompt);
    if (rows.n_tokens != static_cast<int>(prompt.size()) || rows.n_heads != static_cast<int>(n_heads) ||
        rows.column_begin != source_begin || rows.column_end != source_end)
      throw Error(ErrorCode::kInternal, "the model returned attention rows of the wrong shape");
    ++result.pairs_used;
    for (int k = 0; k < n_t; ++k) {
      const std::vector<int>& want = aligned[static_cast<size_t>(k)];
      if (want.empty()) continue;
      ++result.target_tokens;
      // The row of the position before target token k is the step that produced it.
      const int row = target_begin - 1 + k;
      for (size_t h = 0; h < n_heads; ++h) {
        int best = 0;
        float best_value = -std::numeric_limits<float>::infinity();
        for (int c = 0; c < n_s; ++c) {
          const float v = rows.at(row, static_cast<int>(h), source_begin + c);
          if (v > best_value) {
            best_value = v;
            best = c;
          }
        }
        int nearest = std::numeric_limits<int>::max();
        for (int j : want) nearest = std::min(nearest, std::abs(best - j));
        const int tolerance = pair.alignment.empty() ? options.tolerance : 0;
        if (nearest <= tolerance) hits[h] += 1;
        distance[h] += static_cast<double>(nearest) / n_s;
      }
    }
  }
  if (result.target_tokens == 0)
    throw Error(ErrorCode::kInvalidArgument, "no usable pair to calibrate on (" + std::to_string(pairs.size()) +
                                                 " given" +
                                                 (result.problems.empty() ? "" : "; " + result.problems.front()) + ")");
  for (size_t h = 0; h < n_heads; ++h)
    result.ranked.push_back({heads[h], hits[h] / static_cast<double>(result.target_tokens),
                             distance[h] / static_cast<double>(result.target_tokens)});
  std::stable_sort(result.ranked.begin(), result.ranked.end(), [](const HeadScore& a, const HeadScore& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.mean_distance < b.mean_distance;
  });
  return result;
}

CalibrationEntry calibration_entry(const HeadCalibration& calibration, const std::string& model_id,
                                   const std::string& source, const std::string& target, int top) {
  if (top < 1) throw Error(ErrorCode::kInvalidArgument, "--top must be >= 1");
  CalibrationEntry e;
  e.model = normalize_model_id(model_id);
  e.source = source;
  e.target = target;
  for (size_t i = 0; i < calibration.ranked.size() && static_cast<int>(i) < top; ++i)
    e.heads.push_back(calibration.ranked[i].head);
  return e;
}

}  // namespace earshot::stages::translation
