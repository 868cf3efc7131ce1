// earshot-session-memory MODEL [--sessions N] [--vad SILERO_FILE] [--policy alignatt|localagreement]
// Opens N stream sessions as `earshot serve` does (engine processor + Silero VAD), feeds
// each 1 s of silence with --vad (a microphone nobody speaks into: no model pass), and
// prints the resident memory per idle session, then after the sessions end, then after
// malloc_trim(0). Numbers, not a test: run it on a quiet machine for figures to quote.
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/families.h"
#include "session/silero_vad.h"
#include "session/stream_session.h"
#include "vad/vad.h"

namespace {

double rss_mb() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace earshot;
  if (argc < 2) {
    std::fprintf(stderr, "usage: earshot-session-memory MODEL [--sessions N] [--vad FILE] [--policy P]\n");
    return 2;
  }
  int n = 50;
  std::string vad_path, policy;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--sessions") == 0) n = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--vad") == 0) vad_path = argv[i + 1];
    if (std::strcmp(argv[i], "--policy") == 0) policy = argv[i + 1];
  }
  try {
    engine::ModelSpec spec;
    spec.path = argv[1];
    std::shared_ptr<const engine::Engine> engine = engine::load(spec);
    session::VadFactory vad;
    if (!vad_path.empty()) vad = session::silero_vad_factory(vad::VadModel::load(vad_path));
    engine::StreamRequest request;
    request.policy = engine->resolve_policy(policy);
    request.language = "en";
    const std::vector<float> quiet(16000, 0.0f);
    auto open = [&] {
      auto s = std::make_shared<session::StreamSession>(engine->open_stream(request), vad ? vad() : nullptr,
                                                        session::StreamOptions{});
      if (vad) {  // without a VAD silence would be speech for the model
        s->push_audio(quiet);
        while (s->has_work()) s->step();
      }
      return s;
    };
    open();  // one-time allocations (thread pools, tables) out of the figures
    malloc_trim(0);
    const double base = rss_mb();
    std::vector<std::shared_ptr<session::StreamSession>> sessions;
    for (int i = 0; i < n; ++i) sessions.push_back(open());
    const double open_rss = rss_mb();
    sessions.clear();
    const double closed = rss_mb();
    malloc_trim(0);
    const double trimmed = rss_mb();
    std::printf("model %s, %d idle sessions (%s VAD)\n", argv[1], n, vad ? "Silero" : "no");
    std::printf("  rss before: %.1f MB\n  rss with the sessions open: %.1f MB (%.2f MB per idle session)\n", base,
                open_rss, (open_rss - base) / n);
    std::printf("  rss after they ended: %.1f MB\n  rss after malloc_trim(0): %.1f MB\n", closed, trimmed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-session-memory: %s\n", e.what());
    return 1;
  }
  return 0;
}
