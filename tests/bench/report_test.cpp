// The report writers: JSON parses and carries every number, the SVG is
// well-formed XML with one box per system and kind, the table and Markdown
// hold one row per system.
#include "bench/report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "fake_processor.h"

namespace earshot::bench {
namespace {
using testing::ManualClock;
using testing::ScriptedProcessor;
using testing::word;

BenchReport sample_report() {
  BenchReport report;
  report.config.dataset = "data/\"quoted\" dir";
  report.config.pacing = "realtime";
  report.config.sessions = 1;
  report.config.threads = 2;
  report.config.normalizer = "english";
  report.config.dataset_problems = {"x.wav: no reference transcript x.txt next to it; file skipped"};
  report.config.utterances = {{"u0", "u0.wav", "hello world again", 2.0}};
  for (int system = 0; system < 2; ++system) {
    ManualClock clock;
    ScriptedProcessor p(clock,
                        {{1, {{word(" hello", 0, 0.4)}, {word(" world", 0.5, 0.9)}}},
                         {4, {{word(" world", 0.5, 1.2), word(" <again>&", 1.3, 1.9)}, {}}}},
                        0.1 * (system + 1));
    StreamOptions o;
    o.pacing = Pacing::kRealtime;
    SystemRun run;
    run.streams.push_back(StreamRecord{0, 0, run_stream(p, std::vector<float>(32000), o, clock), ""});
    run.stats.available = system == 0;
    run.stats.encoder_passes = 4;
    run.stats.encoder_seconds = 0.2;
    run.stats.decoder_calls = 40;
    run.stats.decoder_seconds = 0.4;
    SystemResult s = summarize(system == 0 ? "alignatt" : "whispercpp-stream", run, report.config.utterances,
                               Pacing::kRealtime, NormalizerKind::kEnglish);
    s.cpu_seconds = 1.5;
    s.peak_rss_bytes = 50L << 20;
    s.peak_rss_scope = "process";
    report.systems.push_back(std::move(s));
  }
  return report;
}

TEST(Report, JsonHasEveryNumber) {
  std::ostringstream out;
  write_json(out, sample_report());
  nlohmann::json j = nlohmann::json::parse(out.str());  // throws on invalid JSON
  EXPECT_EQ(j["config"]["dataset"], "data/\"quoted\" dir");
  EXPECT_EQ(j["config"]["pacing"], "realtime");
  EXPECT_EQ(j["config"]["dataset_problems"].size(), 1u);
  ASSERT_EQ(j["systems"].size(), 2u);
  const auto& s = j["systems"][0];
  EXPECT_EQ(s["name"], "alignatt");
  for (const char* key : {"reference", "correct", "substitutions", "deletions", "insertions", "errors", "rate"}) {
    EXPECT_TRUE(s["wer"][key].is_number()) << key;
    EXPECT_TRUE(s["cer"][key].is_number()) << key;
  }
  for (const char* d : {"delay", "provisional_delay", "first_word_delay", "first_word_provisional_delay"})
    for (const char* key : {"count", "min", "mean", "median", "p90", "max"})
      EXPECT_TRUE(s[d][key].is_number()) << d << "." << key;
  EXPECT_EQ(s["delay"]["values"].size(), 3u);
  EXPECT_NEAR(s["delay"]["median"].get<double>(), 0.7, 1e-9);  // delays 0.7 (hello), 1.0, 0.3
  for (const char* key : {"audio_seconds", "elapsed_wall_seconds", "compute_wall_seconds", "cpu_seconds", "rtf_cpu",
                          "rtf_wall", "peak_rss_bytes"})
    EXPECT_TRUE(s[key].is_number()) << key;
  EXPECT_NEAR(s["rtf_cpu"].get<double>(), 0.75, 1e-9);
  EXPECT_NEAR(s["compute"]["encoder_ms_per_pass"].get<double>(), 50.0, 1e-9);
  EXPECT_NEAR(s["compute"]["decoder_ms_per_pass"].get<double>(), 100.0, 1e-9);
  EXPECT_NEAR(s["compute"]["passes_per_audio_second"].get<double>(), 2.0, 1e-9);
  EXPECT_NEAR(s["compute"]["decoder_calls_per_pass"].get<double>(), 10.0, 1e-9);  // 40 calls over 4 passes
  EXPECT_TRUE(j["systems"][1]["compute"]["decoder_calls_per_pass"].is_null());
  EXPECT_TRUE(j["systems"][1]["compute"]["encoder_ms_per_pass"].is_null());  // not exposed
  EXPECT_TRUE(s["sessions"][0]["max_lag"].is_number());
  const auto& f = s["files"][0];
  EXPECT_EQ(f["hypothesis"], "hello world <again>&");
  EXPECT_EQ(f["hypothesis_normalized"], "hello world");  // <...> spans are removed
  EXPECT_EQ(f["wer"]["errors"], 1);
  EXPECT_TRUE(f["error"].is_null());
  EXPECT_EQ(f["emissions"].size(), 5u);
  EXPECT_EQ(f["emissions"][1].size(), 5u);
  EXPECT_TRUE(f["time_to_first_commit"].is_number());
}

// Minimal XML well-formedness: balanced tags, quoted attributes, escaped text.
void expect_well_formed_xml(const std::string& xml) {
  std::vector<std::string> stack;
  size_t i = xml.find("?>");
  ASSERT_NE(i, std::string::npos);
  i += 2;
  while ((i = xml.find_first_of("<&", i)) != std::string::npos) {
    if (xml[i] == '&') {
      const size_t semi = xml.find(';', i);
      ASSERT_NE(semi, std::string::npos);
      const std::string entity = xml.substr(i, semi - i + 1);
      EXPECT_TRUE(entity == "&amp;" || entity == "&lt;" || entity == "&gt;" || entity == "&quot;") << entity;
      i = semi;
      continue;
    }
    const size_t close = xml.find('>', i);
    ASSERT_NE(close, std::string::npos);
    std::string tag = xml.substr(i + 1, close - i - 1);
    EXPECT_EQ(tag.find('<'), std::string::npos) << tag;
    EXPECT_EQ(std::count(tag.begin(), tag.end(), '"') % 2, 0) << tag;
    if (tag[0] == '/') {
      ASSERT_FALSE(stack.empty()) << tag;
      EXPECT_EQ(stack.back(), tag.substr(1));
      stack.pop_back();
    } else if (tag.back() != '/') {
      stack.push_back(tag.substr(0, tag.find(' ')));
    }
    i = close;
  }
  EXPECT_TRUE(stack.empty());
}

TEST(Report, SvgIsWellFormedWithABoxPerSystemAndKind) {
  std::ostringstream out;
  BenchReport report = sample_report();
  report.systems[1].name = "a<b>&c";
  write_svg(out, report);
  const std::string svg = out.str();
  expect_well_formed_xml(svg);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  size_t boxes = 0;
  for (size_t p = svg.find("<rect"); p != std::string::npos; p = svg.find("<rect", p + 1)) ++boxes;
  EXPECT_EQ(boxes, 1u + 4u);  // background + 2 systems x (committed, provisional)
  EXPECT_NE(svg.find("alignatt committed (n=3)"), std::string::npos);
  EXPECT_NE(svg.find("a&lt;b&gt;&amp;c provisional"), std::string::npos);
}

TEST(Report, TableAndMarkdownHaveOneRowPerSystem) {
  BenchReport report = sample_report();
  std::ostringstream table, md;
  write_table(table, report);
  write_markdown(md, report);
  EXPECT_NE(table.str().find("WER%"), std::string::npos);
  EXPECT_NE(table.str().find("whispercpp-stream"), std::string::npos);
  EXPECT_NE(md.str().find("| alignatt | 33.33 |"), std::string::npos) << md.str();
  EXPECT_NE(md.str().find("x.wav: no reference"), std::string::npos);
  EXPECT_EQ(json_quote("a\"b\\\n\x01"), "\"a\\\"b\\\\\\n\\u0001\"");
}

}  // namespace
}  // namespace earshot::bench
