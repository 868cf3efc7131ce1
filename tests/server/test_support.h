// A real WebSocket/HTTP client (Boost.Beast, synchronous) and a fixture that
// runs the server in-process on 127.0.0.1 with deterministic doubles.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../session/fakes.h"
#include "../support/wait.h"
#include "protocol/wlk/projection.h"
#include "server/pcm_decoder.h"
#include "server/server.h"

namespace earshot::testing {

class WsClient {
 public:
  // Connects and upgrades; throws std::runtime_error when the upgrade is refused.
  // receive_buffer_bytes > 0: the socket's SO_RCVBUF, set before connecting (no
  // autotuning), so that a client that stops reading stalls the server's writes
  // after a few KB, however fast the machine makes updates.
  WsClient(uint16_t port, const std::string& target, std::vector<std::pair<std::string, std::string>> headers = {},
           int receive_buffer_bytes = 0);
  ~WsClient();

  void send_binary(const std::vector<uint8_t>& bytes);
  void send_text(const std::string& text);
  void send_end() { send_binary({}); }
  void send_pcm(const std::vector<int16_t>& samples, size_t frame_bytes) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(samples.data());
    size_t total = samples.size() * 2;
    for (size_t i = 0; i < total; i += frame_bytes)
      send_binary(std::vector<uint8_t>(bytes + i, bytes + std::min(total, i + frame_bytes)));
  }

  // The next text message, or nullopt once the server closed (close_code() tells why).
  std::optional<nlohmann::json> read();
  // Every message until ready_to_stop (included) or the close.
  std::vector<nlohmann::json> read_until_stop() {
    std::vector<nlohmann::json> out;
    while (auto m = read()) {
      out.push_back(*m);
      if (m->value("type", "") == "ready_to_stop") break;
    }
    return out;
  }
  int close_code() const;
  std::string close_reason() const;
  void close();
  // Drops the TCP connection without a close handshake.
  void drop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct HttpResult {
  int status = 0;
  std::string body;
  std::string content_type;
  std::map<std::string, std::string> headers;  // as sent
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

HttpResult http_request(uint16_t port, const std::string& method, const std::string& target, std::string body = "",
                        std::vector<std::pair<std::string, std::string>> headers = {});

// s16le quantisation, as a PCM client sends it.
inline std::vector<int16_t> to_s16(const std::vector<float>& samples) {
  std::vector<int16_t> out(samples.size());
  for (size_t i = 0; i < samples.size(); ++i)
    out[i] = static_cast<int16_t>(std::lround(std::clamp(samples[i], -1.0f, 32767.0f / 32768.0f) * 32768.0f));
  return out;
}
// A 16 kHz mono 16-bit WAV file of `pcm`, as an upload carries it.
inline std::string wav_file_bytes(const std::vector<int16_t>& pcm) {
  std::string out;
  auto put = [&out](uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  const auto data = static_cast<uint32_t>(pcm.size() * 2);
  out += "RIFF";
  put(36 + data, 4);
  out += "WAVEfmt ";
  put(16, 4), put(1, 2), put(1, 2), put(16000, 4), put(32000, 4), put(2, 2), put(16, 2);
  out += "data";
  put(data, 4);
  out.append(reinterpret_cast<const char*>(pcm.data()), data);
  return out;
}

inline std::vector<float> from_s16(const std::vector<int16_t>& samples) {
  std::vector<float> out(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) out[i] = static_cast<float>(samples[i]) / 32768.0f;
  return out;
}

inline server::ServerHooks fake_hooks() {
  server::ServerHooks hooks;
  hooks.make_processor = [](const server::ProcessorRequest& r) -> std::unique_ptr<OnlineProcessor> {
    FakeProcessor::Hooks h;
    h.language = r.language == "auto" ? "en" : r.language;
    return std::make_unique<FakeProcessor>(h);
  };
  hooks.make_vad = [] { return std::make_unique<FakeVad>(); };
  hooks.check_language = [](const std::string& language) -> std::string {
    if (language == "en" || language == "fr") return "";
    return "unsupported language '" + language + "': this model knows en, fr or auto";
  };
  return hooks;
}

// Lines of `samples` run through a session alone (same doubles, same options), as protocol JSON.
inline nlohmann::json lines_alone(const std::vector<float>& samples, const std::string& language = "en",
                                  session::StreamOptions options = {}) {
  auto hooks = fake_hooks();
  session::StreamSession s(hooks.make_processor({language, {}}), hooks.make_vad(), options);
  s.push_audio(samples);
  s.end_of_stream();
  while (s.has_work()) s.step();
  return protocol::wlk::full_update(protocol::wlk::snapshot_of(s))["lines"];
}

// Applies diff-mode messages to rebuild the client's line list.
inline void apply_update(nlohmann::json& lines, const nlohmann::json& m) {
  std::string type = m.value("type", "");
  if (type == "snapshot") {
    lines = m["lines"];
  } else if (type == "diff") {
    nlohmann::json kept = nlohmann::json::array();
    size_t pruned = m.value("lines_pruned", 0u);
    size_t n_new = m.contains("new_lines") ? m["new_lines"].size() : 0;
    size_t keep = m["n_lines"].get<size_t>() - n_new;
    for (size_t i = pruned; i < lines.size() && kept.size() < keep; ++i) kept.push_back(lines[i]);
    if (m.contains("new_lines"))
      for (const auto& l : m["new_lines"]) kept.push_back(l);
    lines = kept;
  }
}

// The model's passes past the first `free_passes` wait at a gate the test opens: a
// pass that outlasts the shutdown grace for as long as the test needs. Every word the
// passes committed is recorded, in order.
struct PassGate {
  std::atomic<int> free_passes{std::numeric_limits<int>::max()};
  Gate gate;
  Counter started, returned;
  // Opens the gate and waits until every pass started has returned.
  bool release() {
    gate.open();
    return eventually([&] { return returned.value() == started.value(); });
  }
  std::string committed() {
    std::lock_guard lock(mutex);
    return committed_text;
  }
  std::mutex mutex;
  std::string committed_text;  // every committed word's text, in order
};

class GatedProcessor : public FakeProcessor {
 public:
  explicit GatedProcessor(std::shared_ptr<PassGate> gate) : gate_(std::move(gate)) {}
  ProcessResult process(bool is_last) override {
    if (gate_->started.add() > gate_->free_passes) gate_->gate.wait();
    ProcessResult result = FakeProcessor::process(is_last);
    {
      std::lock_guard lock(gate_->mutex);
      for (const Word& w : result.committed) gate_->committed_text += w.text;
    }
    gate_->returned.add();
    return result;
  }

 private:
  std::shared_ptr<PassGate> gate_;
};

// Hooks whose streams run GatedProcessor (fake_hooks otherwise).
inline server::ServerHooks gated_hooks(const std::shared_ptr<PassGate>& gate) {
  server::ServerHooks hooks = fake_hooks();
  hooks.make_processor = [gate](const server::ProcessorRequest&) -> std::unique_ptr<OnlineProcessor> {
    return std::make_unique<GatedProcessor>(gate);
  };
  return hooks;
}

// A shutdown whose grace (0.3 s) runs out while a model pass runs: the server's
// settings for it (0.2 s steps; the final result waits up to final_pass_wait for the
// running pass) and a gate letting the first 10 passes (2 s of audio) through.
inline std::shared_ptr<PassGate> grace_over_in_a_pass(server::ServerConfig& config, double final_pass_wait) {
  config.shutdown_grace_seconds = 0.3;
  config.final_pass_wait_seconds = final_pass_wait;
  config.stream.max_step_seconds = 0.2;
  auto gate = std::make_shared<PassGate>();
  gate->free_passes = 10;
  return gate;
}

// The text of every line of a WhisperLiveKit update, joined.
inline std::string lines_text(const nlohmann::json& update) {
  std::string text;
  for (const nlohmann::json& line : update["lines"]) text += line["text"].get<std::string>();
  return text;
}

class ServerFixture : public ::testing::Test {
 protected:
  void start(server::ServerConfig config = {}, server::ServerHooks hooks = fake_hooks()) {
    config.port = 0;
    config.host = "127.0.0.1";
    config.update_interval_seconds = 0.01;
    server_ = std::make_unique<server::Server>(config, hooks);
    server_->start();
    port_ = server_->port();
  }
  void TearDown() override { server_.reset(); }

  // Waits (bounded) until the server has no session left.
  bool wait_idle() {
    return eventually([&] { return server_->active_sessions() == 0; });
  }

  std::unique_ptr<server::Server> server_;
  uint16_t port_ = 0;
};

// 1 s of tone, a 6 s pause, 1 s of louder tone: two text lines around a silence line.
inline std::vector<float> two_phrases(float a = 0.1f, float b = 0.3f) {
  return concat({tone(1.0, a), silence(6.0), tone(1.0, b)});
}

}  // namespace earshot::testing
