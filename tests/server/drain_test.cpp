// Readiness (/ready) apart from liveness (/health), draining on shutdown (new
// sessions refused before the upgrade, live streams go on to their final lines),
// and the fleet metrics in /metrics, parsed as Prometheus text.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

const std::vector<std::pair<std::string, std::string>> kUpgrade = {{"Connection", "Upgrade"},
                                                                   {"Upgrade", "websocket"},
                                                                   {"Sec-WebSocket-Version", "13"},
                                                                   {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}};

// One sample of a Prometheus text page: name, labels as written, value.
struct Sample {
  std::string name, labels;
  double value = 0;
};

// Parses the whole page, failing the test on any line that is not a comment or a
// sample, or a sample whose family has no TYPE line before it.
std::vector<Sample> parse_metrics(const std::string& text) {
  std::vector<Sample> out;
  std::map<std::string, std::string> types;
  const std::regex type_line(R"(# TYPE ([a-z_]+) (counter|gauge|histogram|summary))");
  const std::regex sample_line(R"(([a-z_]+)(\{[^}]*\})? (-?[0-9.e+-]+|\+Inf|NaN))");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, type_line)) {
      types[m[1]] = m[2];
    } else if (line.rfind("# HELP ", 0) == 0) {
      continue;
    } else if (std::regex_match(line, m, sample_line)) {
      std::string family = m[1];
      for (const char* suffix : {"_bucket", "_sum", "_count"})
        if (!types.count(family) && family.size() > std::strlen(suffix) &&
            family.compare(family.size() - std::strlen(suffix), std::string::npos, suffix) == 0)
          family.resize(family.size() - std::strlen(suffix));
      EXPECT_TRUE(types.count(family)) << "no TYPE for " << line;
      out.push_back({m[1], m[2], std::stod(m[3])});
    } else {
      ADD_FAILURE() << "not Prometheus text: '" << line << "'";
    }
  }
  return out;
}

double metric(const std::vector<Sample>& samples, const std::string& name, const std::string& labels = "") {
  for (const Sample& s : samples)
    if (s.name == name && s.labels == labels) return s.value;
  ADD_FAILURE() << name << labels << " missing";
  return -1;
}

class Drain : public ServerFixture {
 protected:
  json get_json(const std::string& target, int expected_status) {
    HttpResult r = http_request(port_, "GET", target);
    EXPECT_EQ(r.status, expected_status) << target << ": " << r.body;
    return r.body.empty() ? json() : json::parse(r.body);
  }
  std::vector<Sample> metrics() { return parse_metrics(http_request(port_, "GET", "/metrics").body); }
  // Waits (bounded) until shutdown() has started draining.
  bool wait_draining() {
    return eventually([&] { return get_json("/health", 200).value("draining", false); });
  }
};

TEST_F(Drain, ReadyIs503WhileFullAndHealthStays200) {
  server::ServerConfig config;
  config.pcm_input = true;
  config.max_sessions = 1;
  start(config);
  EXPECT_EQ(get_json("/ready", 200), json::parse(R"({"ready":true,"draining":false,"sessions":0,"max_sessions":1})"));
  WsClient first(port_, "/asr");
  EXPECT_EQ(first.read().value()["type"], "config");
  HttpResult full = http_request(port_, "GET", "/ready");
  EXPECT_EQ(full.status, 503);
  EXPECT_EQ(full.header("Retry-After"), "1");
  EXPECT_EQ(json::parse(full.body), json::parse(R"({"ready":false,"draining":false,"sessions":1,"max_sessions":1})"));
  json health = get_json("/health", 200);
  EXPECT_EQ(health["status"], "ok");
  EXPECT_FALSE(health.contains("draining"));
  WsClient refused(port_, "/asr");
  EXPECT_EQ(refused.read().value()["type"], "error");
  auto m = metrics();
  EXPECT_EQ(metric(m, "earshot_ready"), 0);
  EXPECT_EQ(metric(m, "earshot_refusals_total", R"({reason="max_sessions"})"), 1);
  EXPECT_EQ(metric(m, "earshot_sessions_live", R"({kind="websocket"})"), 1);
  first.send_end();
  first.read_until_stop();
  first.close();
  refused.close();
  EXPECT_TRUE(wait_idle());
  EXPECT_EQ(get_json("/ready", 200)["ready"], true);
  EXPECT_EQ(metric(metrics(), "earshot_ready"), 1);
}

TEST_F(Drain, RefusesNewSessionsWhileLiveStreamsFinishWithAllTheirAudio) {
  server::ServerConfig config;
  config.pcm_input = true;
  config.drain_seconds = 120;  // far past the test's hang guard
  start(config);
  WsClient live(port_, "/asr");
  live.read();
  std::vector<int16_t> before = to_s16(tone(1.0, 0.1f)), after = to_s16(concat({silence(6.0), tone(1.0, 0.3f)}));
  live.send_pcm(before, 3200);
  std::future<void> stopped = std::async(std::launch::async, [this] { server_->shutdown(); });
  ASSERT_TRUE(wait_draining());
  // Liveness still 200, readiness 503, a new stream refused before its upgrade with the protocol's error.
  EXPECT_EQ(get_json("/health", 200),
            json::parse(R"({"status":"ok","backend":"earshot","ready":false,"draining":true})"));
  HttpResult ready = http_request(port_, "GET", "/ready");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(json::parse(ready.body)["draining"], true);
  HttpResult asr = http_request(port_, "GET", "/asr", "", kUpgrade);
  EXPECT_EQ(asr.status, 503);
  EXPECT_EQ(asr.header("Retry-After"), "1");
  EXPECT_EQ(json::parse(asr.body)["type"], "error");
  EXPECT_NE(json::parse(asr.body)["error"].get<std::string>().find("draining"), std::string::npos);
  HttpResult listen = http_request(port_, "GET", "/v1/listen?encoding=linear16&sample_rate=16000", "", kUpgrade);
  EXPECT_EQ(listen.status, 503);
  EXPECT_EQ(json::parse(listen.body)["err_code"], "SERVICE_UNAVAILABLE");
  HttpResult flux = http_request(port_, "GET", "/v2/listen?encoding=linear16&sample_rate=16000", "", kUpgrade);
  EXPECT_EQ(flux.status, 503);
  EXPECT_EQ(json::parse(flux.body)["err_code"], "SERVICE_UNAVAILABLE");
  EXPECT_THROW(WsClient(port_, "/asr"), std::exception);
  auto m = metrics();
  EXPECT_EQ(metric(m, "earshot_draining"), 1);
  EXPECT_EQ(metric(m, "earshot_ready"), 0);
  EXPECT_EQ(metric(m, "earshot_refusals_total", R"({reason="draining"})"), 4);
  EXPECT_EQ(metric(m, "earshot_sessions_live", R"({kind="websocket"})"), 1);
  // The live stream goes on: audio sent after the drain began is transcribed too.
  live.send_pcm(after, 3200);
  live.send_end();
  std::vector<json> messages = live.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages.back()["type"], "ready_to_stop");
  std::vector<int16_t> all = before;
  all.insert(all.end(), after.begin(), after.end());
  EXPECT_EQ(messages[messages.size() - 2]["lines"], lines_alone(from_s16(all)));
  live.close();
  // Returned once the last stream was gone, not at the end of the drain time.
  ASSERT_EQ(stopped.wait_for(kHangGuard), std::future_status::ready) << "shutdown still draining with no stream left";
}

TEST_F(Drain, StreamsStillLiveWhenTheDrainTimeIsOverGetTheirFinalLines) {
  server::ServerConfig config;
  config.pcm_input = true;
  config.drain_seconds = 0.3;
  start(config);
  WsClient live(port_, "/asr");
  live.read();
  live.send_pcm(to_s16(tone(1.3, 0.1f)), 3200);
  std::vector<json> messages;
  while (messages.empty() || messages.back()["lines"].empty() || messages.back()["lines"][0]["text"] != " w100 w100")
    messages.push_back(live.read().value());
  std::thread stopper([this] { server_->shutdown(); });
  for (const json& m : live.read_until_stop()) messages.push_back(m);
  EXPECT_EQ(messages.back()["type"], "ready_to_stop");
  EXPECT_EQ(messages[messages.size() - 2]["lines"][0]["text"], " w100 w100 p100");
  EXPECT_EQ(live.read(), std::nullopt);
  EXPECT_EQ(live.close_code(), 1001);
  stopper.join();
}

TEST_F(Drain, MetricsPageIsPrometheusTextWithLagHistogram) {
  server::ServerConfig config;
  config.pcm_input = true;
  config.api_token = "tok";
  // The lag sampler's clock, stepped by the test: it samples when a second passed since its last sample.
  auto clock = std::make_shared<std::atomic<int64_t>>(0);  // ms
  server::ServerHooks hooks = fake_hooks();
  hooks.now = [clock] { return std::chrono::steady_clock::time_point(std::chrono::milliseconds(clock->load())); };
  start(config, hooks);
  WsClient bad(port_, "/asr?token=wrong");
  EXPECT_EQ(bad.read(), std::nullopt);
  WsClient badmode(port_, "/asr?token=tok&mode=sideways");
  EXPECT_EQ(badmode.read().value()["type"], "error");
  WsClient live(port_, "/asr?token=tok");
  live.read();
  live.send_pcm(to_s16(tone(2.5, 0.1f)), 3200);
  auto lag_samples = [&] {
    for (const Sample& s : parse_metrics(server_->metrics_text()))
      if (s.name == "earshot_stream_lag_seconds_count") return s.value;
    return -1.0;
  };
  auto passes = [&] {
    for (const Sample& s : parse_metrics(server_->metrics_text()))
      if (s.name == "earshot_passes_total") return s.value;
    return -1.0;
  };
  ASSERT_TRUE(eventually([&] { return passes() >= 1; })) << server_->metrics_text();
  // One sample at once, the next once the clock passed a second.
  ASSERT_TRUE(eventually([&] { return lag_samples() == 1; })) << server_->metrics_text();
  *clock = 1000;
  ASSERT_TRUE(eventually([&] { return lag_samples() == 2; })) << server_->metrics_text();
  HttpResult page = http_request(port_, "GET", "/metrics", "", {{"Authorization", "Bearer tok"}});
  EXPECT_EQ(page.content_type, "text/plain; version=0.0.4; charset=utf-8");
  std::vector<Sample> m = parse_metrics(page.body);
  EXPECT_EQ(metric(m, "earshot_refusals_total", R"({reason="unauthorized"})"), 1);
  EXPECT_EQ(metric(m, "earshot_refusals_total", R"({reason="bad_request"})"), 1);
  EXPECT_EQ(metric(m, "earshot_refusals_total", R"({reason="draining"})"), 0);
  EXPECT_EQ(metric(m, "earshot_draining"), 0);
  EXPECT_EQ(metric(m, "earshot_sessions_max"), 16);
  EXPECT_GE(metric(m, "earshot_passes_total"), 1);
  // Buckets: cumulative, increasing bounds, +Inf equal to the count; at least two samples.
  double previous_bound = -1, previous = 0;
  bool inf = false;
  for (const Sample& s : m) {
    if (s.name != "earshot_stream_lag_seconds_bucket") continue;
    std::smatch le;
    const std::regex bucket_label(R"re(\{le="([^"]+)"\})re");
    ASSERT_TRUE(std::regex_match(s.labels, le, bucket_label)) << s.labels;
    EXPECT_FALSE(inf) << "+Inf must be the last bucket";
    if (le[1] == "+Inf") {
      inf = true;
    } else {
      EXPECT_GT(std::stod(le[1]), previous_bound);
      previous_bound = std::stod(le[1]);
    }
    EXPECT_GE(s.value, previous);
    previous = s.value;
  }
  EXPECT_TRUE(inf);
  const double count = metric(m, "earshot_stream_lag_seconds_count");
  EXPECT_EQ(previous, count);
  EXPECT_EQ(count, 2);  // the clock stays short of the next second
  EXPECT_GE(metric(m, "earshot_stream_lag_seconds_sum"), 0);
  live.send_end();
  live.read_until_stop();
}

}  // namespace
}  // namespace earshot::testing
