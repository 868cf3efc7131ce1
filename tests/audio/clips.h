// Test clips made at test time from ../shared/data/jfk.wav with Debian's ffmpeg CLI.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace earshot::audio::testing {

inline std::filesystem::path jfk_wav() { return std::filesystem::path(EARSHOT_SHARED_DIR) / "data" / "jfk.wav"; }

// The clip `name` made with `ffmpeg -i jfk.wav <args> <file>`; made once, shared by all
// test processes (written to a private name, then renamed, so parallel tests never see half a file).
inline std::filesystem::path clip_dir() { return EARSHOT_AUDIO_CLIP_DIR; }

inline std::filesystem::path make_clip(const std::string& name, const std::string& args) {
  const std::filesystem::path dir = EARSHOT_AUDIO_CLIP_DIR;
  std::filesystem::create_directories(dir);
  const std::filesystem::path out = dir / name;
  if (std::filesystem::exists(out)) return out;
  const std::filesystem::path tmp = dir / (std::to_string(getpid()) + ".tmp." + name);
  const std::string cmd = "ffmpeg -nostdin -hide_banner -loglevel error -y -i '" + jfk_wav().string() + "' " + args +
                          " '" + tmp.string() + "'";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  std::filesystem::rename(tmp, out);
  return out;
}

// The clip `name` made with `ffmpeg -f lavfi -i <source> <args> <file>` (a generated
// signal: silence, a tone), made once and shared as make_clip's are.
inline std::filesystem::path make_generated_clip(const std::string& name, const std::string& source,
                                                 const std::string& args) {
  const std::filesystem::path dir = EARSHOT_AUDIO_CLIP_DIR;
  std::filesystem::create_directories(dir);
  const std::filesystem::path out = dir / name;
  if (std::filesystem::exists(out)) return out;
  const std::filesystem::path tmp = dir / (std::to_string(getpid()) + ".tmp." + name);
  const std::string cmd = "ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi -i '" + source + "' " + args +
                          " '" + tmp.string() + "'";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  std::filesystem::rename(tmp, out);
  return out;
}

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Match {
  int lag = 0;  // output[i + lag] lines up with reference[i]
  double correlation = 0;
  double snr_db = 0;  // reference power over (output - reference) power at that lag
};

// Best alignment of `output` against `reference` within +-max_lag samples: the lag is
// searched on a 2 s window of speech, then scored over the whole reference.
inline Match best_match(const std::vector<float>& reference, const std::vector<float>& output, int max_lag) {
  auto score = [&](int lag, size_t begin, size_t end) {
    double xy = 0, xx = 0, yy = 0, err = 0;
    for (size_t i = begin; i < end; ++i) {
      const long j = long(i) + lag;
      const double x = reference[i];
      const double y = (j >= 0 && j < long(output.size())) ? output[j] : 0.0;
      xy += x * y, xx += x * x, yy += y * y, err += (x - y) * (x - y);
    }
    return Match{lag, xy / std::sqrt(xx * yy + 1e-30), 10 * std::log10(xx / (err + 1e-30))};
  };
  const size_t begin = std::min<size_t>(16000, reference.size()), end = std::min<size_t>(48000, reference.size());
  Match best{0, -2, 0};
  for (int lag = -max_lag; lag <= max_lag; ++lag) {
    const Match m = score(lag, begin, end);
    if (m.correlation > best.correlation) best = m;
  }
  return score(best.lag, 0, reference.size());
}

}  // namespace earshot::audio::testing
