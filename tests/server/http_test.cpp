// HTTP routes: page, health, models, metrics, CORS, auth, and the
// OpenAI-compatible transcription endpoint.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "audio/audio.h"
#include "server/core.h"
#include "server/web_page.h"
#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string multipart(const std::vector<std::tuple<std::string, std::string, std::string>>& fields,
                      const std::string& boundary) {
  std::string body;
  for (const auto& [name, filename, data] : fields) {
    body += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"";
    if (!filename.empty()) body += "; filename=\"" + filename + "\"\r\nContent-Type: audio/wav";
    body += "\r\n\r\n" + data + "\r\n";
  }
  return body + "--" + boundary + "--\r\n";
}

class Http : public ServerFixture {
 protected:
  void SetUp() override {
    server::ServerConfig config;
    config.model_id = "whisper-tiny.en";
    config.backend = "earshot-test";
    config.max_upload_bytes = 1 << 20;
    config.cors_origins = {"https://app.example"};
    config.api_token = "tok";
    // serve's plan on two cores: two workers of one thread, a lone pass on both.
    config.workers = 2;
    config.pass_threads = {1, 2};
    auto hooks = fake_hooks();
    hooks.make_decoder = [] { return audio::StreamDecoder::create(); };
    // An engine that batches steps across streams (--batch-decode) reports its counts.
    hooks.batch_totals = [] { return server::BatchTotals{12, 5, 3}; };
    start(config, hooks);
  }
  HttpResult transcribe(const std::string& format, const std::string& token = "tok", std::string file = "") {
    if (file.empty()) file = read_text(EARSHOT_SHARED_DIR "/data/jfk.wav");
    std::string body = multipart(
        {{"file", "jfk.wav", file}, {"model", "", "whisper-1"}, {"response_format", "", format}}, "XyZ-boundary");
    return http_request(
        port_, "POST", "/v1/audio/transcriptions", body,
        {{"Content-Type", "multipart/form-data; boundary=XyZ-boundary"}, {"Authorization", "Bearer " + token}});
  }
  // What a lone session makes of jfk.wav with the file options.
  json expected_lines() {
    auto decoder = audio::StreamDecoder::create();
    std::string file = read_text(EARSHOT_SHARED_DIR "/data/jfk.wav");
    std::vector<float> samples =
        decoder->push(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(file.data()), file.size()));
    auto tail = decoder->finish();
    samples.insert(samples.end(), tail.begin(), tail.end());
    session::StreamOptions options;
    options.max_pending_seconds = 0;
    return lines_alone(samples, "en", options);
  }
};

TEST_F(Http, PageHealthModels) {
  HttpResult page = http_request(port_, "GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(page.body, read_text(EARSHOT_SOURCE_DIR "/web/index.html"));
  EXPECT_EQ(page.body, std::string(server::web_page()));

  HttpResult health = http_request(port_, "GET", "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(json::parse(health.body), json::parse(R"({"status":"ok","backend":"earshot-test","ready":true})"));

  HttpResult models = http_request(port_, "GET", "/v1/models", "", {{"Authorization", "Bearer tok"}});
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(
      json::parse(models.body),
      json::parse(R"({"object":"list","data":[{"id":"whisper-tiny.en","object":"model","owned_by":"earshot"}]})"));

  HttpResult missing = http_request(port_, "GET", "/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(json::parse(missing.body)["error"]["message"], "no route for GET /nope");
}

TEST_F(Http, TokenProtectsApiAndMetrics) {
  for (const char* target : {"/v1/models", "/metrics"}) {
    HttpResult none = http_request(port_, "GET", target);
    EXPECT_EQ(none.status, 401) << target;
    EXPECT_EQ(json::parse(none.body)["error"]["message"], "invalid or missing API token");
    EXPECT_EQ(http_request(port_, "GET", target, "", {{"Authorization", "Bearer nope"}}).status, 401);
  }
  EXPECT_EQ(transcribe("json", "wrong").status, 401);
}

TEST_F(Http, CorsOnlyForListedOrigins) {
  HttpResult allowed = http_request(port_, "GET", "/health", "", {{"Origin", "https://app.example"}});
  EXPECT_EQ(allowed.header("Access-Control-Allow-Origin"), "https://app.example");
  HttpResult other = http_request(port_, "GET", "/health", "", {{"Origin", "https://evil.example"}});
  EXPECT_EQ(other.header("Access-Control-Allow-Origin"), "");
  HttpResult preflight = http_request(port_, "OPTIONS", "/v1/audio/transcriptions", "",
                                      {{"Origin", "https://app.example"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(preflight.status, 204);
  EXPECT_EQ(preflight.header("Access-Control-Allow-Headers"), "Authorization, Content-Type");
}

TEST_F(Http, TranscriptionJsonAndText) {
  json lines = expected_lines();
  std::string text;
  for (const json& l : lines)
    if (l["speaker"] != -2) text += l["text"].get<std::string>();
  text = text.substr(text.find_first_not_of(' '));
  ASSERT_FALSE(text.empty());

  HttpResult r = transcribe("json");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body), json({{"text", text}, {"usage", {{"type", "duration"}, {"seconds", 11}}}}));

  HttpResult plain = transcribe("text");
  EXPECT_EQ(plain.status, 200);
  EXPECT_EQ(plain.content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(plain.body, text + "\n");
}

TEST_F(Http, TranscriptionVerboseJsonHasWordsAndSegments) {
  HttpResult r = transcribe("verbose_json");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["task"], "transcribe");
  EXPECT_EQ(j["language"], "en");
  EXPECT_DOUBLE_EQ(j["duration"].get<double>(), 11.0);
  json lines = expected_lines();
  std::vector<json> text_lines;
  for (const json& l : lines)
    if (l["speaker"] != -2) text_lines.push_back(l);
  ASSERT_EQ(j["segments"].size(), text_lines.size());
  for (size_t i = 0; i < text_lines.size(); ++i) {
    EXPECT_EQ(j["segments"][i]["id"], i);
    EXPECT_EQ(j["segments"][i]["text"], text_lines[i]["text"]);
  }
  // Words are the fake model's 0.5 s windows, without the leading space.
  ASSERT_FALSE(j["words"].empty());
  std::string joined;
  for (const json& w : j["words"]) {
    EXPECT_EQ(w["word"].get<std::string>().find(' '), std::string::npos);
    EXPECT_LT(w["start"].get<double>(), w["end"].get<double>());
    joined += " " + w["word"].get<std::string>();
  }
  EXPECT_EQ(joined.substr(1), j["text"]);
}

TEST_F(Http, TranscriptionSrtAndVtt) {
  HttpResult srt = transcribe("srt");
  ASSERT_EQ(srt.status, 200);
  EXPECT_EQ(srt.body.rfind("1\n00:00:", 0), 0u) << srt.body;
  EXPECT_NE(srt.body.find(" --> "), std::string::npos);
  EXPECT_NE(srt.body.find(","), std::string::npos);
  HttpResult vtt = transcribe("vtt");
  ASSERT_EQ(vtt.status, 200);
  EXPECT_EQ(vtt.body.rfind("WEBVTT\n\n00:00:", 0), 0u) << vtt.body;
}

TEST_F(Http, TranscriptionRejectsBadRequests) {
  HttpResult format = transcribe("yaml");
  EXPECT_EQ(format.status, 400);
  EXPECT_EQ(json::parse(format.body)["error"]["message"],
            "unknown response_format 'yaml': expected json, verbose_json, diarized_json, text, srt or vtt");
  HttpResult diarized = transcribe("diarized_json");  // this server does not diarize
  EXPECT_EQ(diarized.status, 400);
  EXPECT_NE(json::parse(diarized.body)["error"]["message"].get<std::string>().find("--diarization-model"),
            std::string::npos);
  HttpResult garbage = transcribe("json", "tok", std::string(5000, 'z'));
  EXPECT_EQ(garbage.status, 400);
  EXPECT_EQ(json::parse(garbage.body)["error"]["message"].get<std::string>().rfind("cannot decode 'jfk.wav': ", 0), 0u);
  HttpResult too_big = transcribe("json", "tok", std::string(2 << 20, 'a'));
  EXPECT_EQ(too_big.status, 413);
  HttpResult no_file =
      http_request(port_, "POST", "/v1/audio/transcriptions", multipart({{"model", "", "x"}}, "b"),
                   {{"Content-Type", "multipart/form-data; boundary=b"}, {"Authorization", "Bearer tok"}});
  EXPECT_EQ(no_file.status, 400);
  EXPECT_EQ(json::parse(no_file.body)["error"]["message"], "missing multipart field 'file' (the audio to transcribe)");
}

TEST_F(Http, MetricsCountSessionsAndAudio) {
  ASSERT_EQ(transcribe("json").status, 200);
  HttpResult m = http_request(port_, "GET", "/metrics", "", {{"Authorization", "Bearer tok"}});
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(m.body.find("earshot_sessions_total{kind=\"file\"} 1\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("earshot_audio_seconds_total 11\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("earshot_sessions_active 0\n"), std::string::npos);
  EXPECT_NE(m.body.find("# TYPE earshot_passes_total counter\n"), std::string::npos);
  EXPECT_NE(m.body.find("earshot_lag_seconds_max"), std::string::npos);
  EXPECT_NE(m.body.find("# TYPE earshot_batch_steps_total counter\nearshot_batch_steps_total 12\n"), std::string::npos);
  EXPECT_NE(m.body.find("earshot_batch_graphs_total 5\n"), std::string::npos);
  EXPECT_NE(m.body.find("# TYPE earshot_batch_size_max gauge\nearshot_batch_size_max 3\n"), std::string::npos);
  // The worker plan, and the file's steps, alone on the workers, ran on both cores.
  EXPECT_NE(m.body.find("earshot_scheduler_workers 2\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("earshot_scheduler_pass_threads 1\n"), std::string::npos);
  EXPECT_NE(m.body.find("earshot_scheduler_pass_threads_max 2\n"), std::string::npos);
  const size_t lent = m.body.find("\nearshot_scheduler_lent_steps_total ");
  ASSERT_NE(lent, std::string::npos);
  EXPECT_GT(std::stol(m.body.substr(lent + std::strlen("\nearshot_scheduler_lent_steps_total "))), 0);
}

TEST(Multipart, ParsesFieldsAndFiles) {
  std::string body =
      "--B\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\nfr\r\n"
      "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a b.webm\"\r\n"
      "Content-Type: audio/webm\r\n\r\n\x01\x02\r\n\x03\r\n--B--\r\n";
  auto parts = server::parse_multipart("multipart/form-data; boundary=B", body);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "language");
  EXPECT_EQ(parts[0].data, "fr");
  EXPECT_EQ(parts[1].name, "file");
  EXPECT_EQ(parts[1].filename, "a b.webm");
  EXPECT_EQ(parts[1].content_type, "audio/webm");
  EXPECT_EQ(parts[1].data, "\x01\x02\r\n\x03");
  EXPECT_THROW(server::parse_multipart("application/json", body), Error);
  EXPECT_THROW(server::parse_multipart("multipart/form-data; boundary=B", "--B\r\nno end"), Error);
}

}  // namespace
}  // namespace earshot::testing
