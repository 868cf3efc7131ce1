#include "stages/translation/record.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace earshot::stages::translation {

namespace {

using nlohmann::json;

json words_json(const std::vector<Word>& words) {
  json out = json::array();
  for (const Word& w : words) {
    json j = {{"text", w.text}, {"start", w.start}, {"end", w.end}};
    if (!w.language.empty()) j["language"] = w.language;
    if (w.speaker >= 0) j["speaker"] = w.speaker;
    if (w.probability >= 0) j["probability"] = w.probability;
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<Word> words_from(const json& a) {
  std::vector<Word> out;
  for (const json& j : a) {
    Word w;
    w.text = j.at("text").get<std::string>();
    w.start = j.at("start").get<double>();
    w.end = j.at("end").get<double>();
    w.language = j.value("language", "");
    w.speaker = j.value("speaker", -1);
    w.probability = j.value("probability", -1.0f);
    out.push_back(std::move(w));
  }
  return out;
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

size_t code_points(std::string_view s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// Code points of the common prefix of a and b (whole characters only).
size_t common_prefix(std::string_view a, std::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  while (n > 0 && n < a.size() && (a[n] & 0xC0) == 0x80) --n;
  return code_points(a.substr(0, n));
}

// Counts model calls: every draft and final sets the attention capture once.
class CountingSession : public llm::LlmSession {
 public:
  CountingSession(std::unique_ptr<llm::LlmSession> inner, int& calls) : inner_(std::move(inner)), calls_(calls) {}
  void set_attention_capture(std::vector<llm::AttentionHead> heads, int b, int e) override {
    ++calls_;
    inner_->set_attention_capture(std::move(heads), b, e);
  }
  llm::AttentionRows decode(std::span<const llm::Token> tokens) override { return inner_->decode(tokens); }
  llm::AttentionRows decode_each(std::span<const llm::Token> tokens, int first,
                                 std::vector<llm::Token>& greedy_after) override {
    return inner_->decode_each(tokens, first, greedy_after);
  }
  llm::Token greedy() const override { return inner_->greedy(); }
  std::vector<float> last_log_probs() const override { return inner_->last_log_probs(); }
  int position() const override { return inner_->position(); }
  void remove_suffix(int from) override { inner_->remove_suffix(from); }

 private:
  std::unique_ptr<llm::LlmSession> inner_;
  int& calls_;
};

class CountingModel : public llm::LlmModel {
 public:
  CountingModel(std::shared_ptr<const llm::LlmModel> inner, int& calls) : inner_(std::move(inner)), calls_(calls) {}
  std::string id() const override { return inner_->id(); }
  std::string architecture() const override { return inner_->architecture(); }
  llm::ModelShape shape() const override { return inner_->shape(); }
  std::vector<llm::Token> tokenize(std::string_view text, bool special) const override {
    return inner_->tokenize(text, special);
  }
  std::string token_bytes(llm::Token t) const override { return inner_->token_bytes(t); }
  std::vector<llm::Token> find_tokens(std::string_view text) const override { return inner_->find_tokens(text); }
  bool is_end_of_generation(llm::Token t) const override { return inner_->is_end_of_generation(t); }
  std::unique_ptr<llm::LlmSession> open_session(const llm::SessionOptions& o) const override {
    return std::make_unique<CountingSession>(inner_->open_session(o), calls_);
  }

 private:
  std::shared_ptr<const llm::LlmModel> inner_;
  int& calls_;
};

}  // namespace

std::string to_json_line(const RecordedEvent& r) {
  json j = {{"t", r.t}};
  const events::Event& e = r.event;
  if (const auto* w = std::get_if<events::WordsCommitted>(&e)) {
    j["type"] = "words";
    j["words"] = words_json(w->words);
  } else if (const auto* p = std::get_if<events::ProvisionalChanged>(&e)) {
    j["type"] = "tail";
    j["words"] = words_json(p->words);
  } else if (const auto* s = std::get_if<events::SpeechStarted>(&e)) {
    j["type"] = "speech_start";
    j["at"] = s->at;
  } else if (const auto* s2 = std::get_if<events::SpeechEnded>(&e)) {
    j["type"] = "speech_end";
    j["at"] = s2->at;
  } else if (const auto* pause = std::get_if<events::Pause>(&e)) {
    j["type"] = "pause";
    j["start"] = pause->start;
    j["end"] = pause->end;
    j["ongoing"] = pause->ongoing;
  } else if (const auto* l = std::get_if<events::LanguageDetected>(&e)) {
    j["type"] = "language";
    j["language"] = l->language;
  } else if (const auto* err = std::get_if<events::StreamError>(&e)) {
    j["type"] = "error";
    j["message"] = err->message;
  } else if (const auto* f = std::get_if<events::Finalized>(&e)) {
    j["type"] = "finalized";
    j["at"] = f->at;
  } else if (std::holds_alternative<events::EndOfStream>(e)) {
    j["type"] = "end";
  } else if (const auto* skip = std::get_if<events::AudioSkipped>(&e)) {
    j["type"] = "skipped";
    j["start"] = skip->start;
    j["end"] = skip->end;
  } else if (const auto* c = std::get_if<events::TranslationCommitted>(&e)) {
    j["type"] = "committed";
    j["segment"] = c->segment;
    j["start"] = c->start;
    j["text"] = c->text;
  } else if (const auto* d = std::get_if<events::TranslationDraftChanged>(&e)) {
    j["type"] = "draft";
    j["segment"] = d->segment;
    j["start"] = d->start;
    j["text"] = d->text;
  } else if (const auto* s3 = std::get_if<events::SegmentTranslated>(&e)) {
    j["type"] = "final";
    j["segment"] = s3->segment;
    j["start"] = s3->start;
    j["end"] = s3->end;
    j["source"] = s3->source;
    j["text"] = s3->translation;
  }
  return j.dump();
}

RecordedEvent from_json_line(std::string_view line) {
  try {
    const json j = json::parse(line);
    RecordedEvent r;
    r.t = j.at("t").get<double>();
    const std::string type = j.at("type").get<std::string>();
    if (type == "words")
      r.event = events::WordsCommitted{words_from(j.at("words"))};
    else if (type == "tail")
      r.event = events::ProvisionalChanged{words_from(j.at("words"))};
    else if (type == "speech_start")
      r.event = events::SpeechStarted{j.at("at").get<double>()};
    else if (type == "speech_end")
      r.event = events::SpeechEnded{j.at("at").get<double>()};
    else if (type == "pause")
      r.event = events::Pause{j.at("start").get<double>(), j.at("end").get<double>(), j.at("ongoing").get<bool>()};
    else if (type == "language")
      r.event = events::LanguageDetected{j.at("language").get<std::string>()};
    else if (type == "error")
      r.event = events::StreamError{j.at("message").get<std::string>()};
    else if (type == "finalized")
      r.event = events::Finalized{j.at("at").get<double>()};
    else if (type == "end")
      r.event = events::EndOfStream{};
    else if (type == "skipped")
      r.event = events::AudioSkipped{j.at("start").get<double>(), j.at("end").get<double>()};
    else if (type == "committed")
      r.event = events::TranslationCommitted{j.at("segment").get<int>(), j.at("start").get<double>(),
                                             j.at("text").get<std::string>()};
    else if (type == "draft")
      r.event = events::TranslationDraftChanged{j.at("segment").get<int>(), j.at("start").get<double>(),
                                                j.at("text").get<std::string>()};
    else if (type == "final")
      r.event =
          events::SegmentTranslated{j.at("segment").get<int>(), j.at("start").get<double>(), j.at("end").get<double>(),
                                    j.at("source").get<std::string>(), j.at("text").get<std::string>()};
    else
      throw std::invalid_argument("unknown type '" + type + "'");
    return r;
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, std::string("not a recorded translation event (") + e.what() +
                                                 "): " + std::string(line.substr(0, 120)));
  }
}

std::vector<RecordedEvent> read_recording(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kIo, "cannot read the recording " + path);
  std::vector<RecordedEvent> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    try {
      out.push_back(from_json_line(line));
    } catch (const Error& e) {
      throw Error(ErrorCode::kInvalidArgument, path + ":" + std::to_string(n) + ": " + e.what());
    }
  }
  return out;
}

InputRecorder::InputRecorder(const std::string& path) : file_(std::fopen(path.c_str(), "w")) {
  if (!file_) throw Error(ErrorCode::kIo, "cannot write the translation recording " + path);
}

InputRecorder::~InputRecorder() {
  if (file_) std::fclose(file_);
}

void InputRecorder::record(const events::Event& event) {
  std::lock_guard lock(mutex_);
  const double now = steady_seconds();
  if (first_ < 0) first_ = now;
  const std::string line = to_json_line({now - first_, event});
  std::fprintf(file_, "%s\n", line.c_str());
  std::fflush(file_);
}

ReplayResult replay(std::shared_ptr<const llm::LlmModel> model, const CalibrationRegistry& registry,
                    const std::vector<RecordedEvent>& input, const std::string& source_language,
                    const TranslationOptions& options) {
  ReplayResult result;
  int calls = 0;
  auto counting = std::make_shared<CountingModel>(std::move(model), calls);
  TranslationService service(counting, registry, 1, options);
  service.set_warning_sink([](const std::string&) {});
  std::unique_ptr<Stage> stage = service.make_synchronous_stage(source_language, options);
  double now = 0;
  std::map<int, double> segment_first, segment_last;  // input times of each segment's source words
  int open_segment = 0;
  std::map<int, std::string> shown;  // per segment: committed so far
  std::map<int, std::vector<std::string>> displays;
  auto emit = [&](events::Event e) {
    if (std::holds_alternative<events::TranslationCommitted>(e) ||
        std::holds_alternative<events::TranslationDraftChanged>(e) ||
        std::holds_alternative<events::SegmentTranslated>(e))
      result.output.push_back({now, std::move(e)});
  };
  for (const RecordedEvent& r : input) {
    now = r.t;
    if (const auto* w = std::get_if<events::WordsCommitted>(&r.event); w && !w->words.empty()) {
      if (!segment_first.count(open_segment)) segment_first[open_segment] = now;
      segment_last[open_segment] = now;
    }
    const size_t before = result.output.size();
    stage->consume(r.event, emit);
    for (size_t i = before; i < result.output.size(); ++i)
      if (const auto* f = std::get_if<events::SegmentTranslated>(&result.output[i].event)) {
        open_segment = f->segment + 1;
        // Words committed with the closing input belong to the next segment too.
        if (const auto* w = std::get_if<events::WordsCommitted>(&r.event); w && !w->words.empty()) {
          segment_first.emplace(open_segment, now);
          segment_last[open_segment] = now;
        }
      }
  }
  result.model_calls = calls;
  // Coverage and delays from the output.
  size_t covered = 0, total = 0;
  std::map<int, std::string> draft;
  for (const RecordedEvent& o : result.output) {
    if (const auto* c = std::get_if<events::TranslationCommitted>(&o.event)) {
      shown[c->segment] += c->text;
      displays[c->segment].push_back(shown[c->segment] + draft[c->segment]);
      if (segment_first.count(c->segment)) result.commit_delays.push_back(o.t - segment_first[c->segment]);
    } else if (const auto* d = std::get_if<events::TranslationDraftChanged>(&o.event)) {
      draft[d->segment] = d->text;
      displays[d->segment].push_back(shown[d->segment] + d->text);
    } else if (const auto* f = std::get_if<events::SegmentTranslated>(&o.event)) {
      ++result.finals;
      size_t most = 0;
      for (const std::string& s : displays[f->segment]) most = std::max(most, common_prefix(f->translation, s));
      covered += most;
      total += code_points(f->translation);
      if (segment_last.count(f->segment)) result.final_lags.push_back(o.t - segment_last[f->segment]);
    }
  }
  result.draft_coverage = total > 0 ? static_cast<double>(covered) / static_cast<double>(total) : 0.0;
  return result;
}

std::string replay_report_json(const ReplayResult& r) {
  auto stats = [](std::vector<double> v) {
    json j = {{"count", v.size()}};
    if (v.empty()) return j;
    std::sort(v.begin(), v.end());
    double sum = 0;
    for (double x : v) sum += x;
    j["mean"] = sum / static_cast<double>(v.size());
    j["p50"] = v[v.size() / 2];
    j["max"] = v.back();
    return j;
  };
  json j = {{"finals", r.finals},
            {"model_calls", r.model_calls},
            {"draft_coverage", r.draft_coverage},
            {"commit_delay_seconds", stats(r.commit_delays)},
            {"final_lag_seconds", stats(r.final_lags)}};
  return j.dump();
}

}  // namespace earshot::stages::translation
