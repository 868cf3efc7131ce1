#include "bench/trace_io.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"

namespace earshot::bench {
namespace {

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '%')
      out += "%25";
    else if (c == '\n')
      out += "%0A";
    else if (c == '\r')
      out += "%0D";
    else
      out += c;
  }
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The text after the first `fields` space-separated fields.
std::string rest_after(const std::string& line, int fields) {
  size_t pos = 0;
  for (int i = 0; i < fields; ++i) {
    pos = line.find(' ', pos);
    if (pos == std::string::npos) return "";
    ++pos;
  }
  return line.substr(pos);
}

}  // namespace

void write_run(std::ostream& out, const SystemRun& run) {
  out << "earshot-run 1\n";
  out << "stats " << (run.stats.available ? 1 : 0) << " " << run.stats.encoder_passes << " "
      << num(run.stats.encoder_seconds) << " " << run.stats.decoder_calls << " " << num(run.stats.decoder_seconds)
      << "\n";
  out << "elapsed " << num(run.elapsed_wall) << "\n";
  for (const StreamRecord& r : run.streams) {
    const StreamTrace& t = r.trace;
    out << "stream " << r.file << " " << r.session << " " << num(t.audio_seconds) << " " << num(t.elapsed_wall) << " "
        << num(t.compute_wall) << "\n";
    for (const Emission& e : t.emissions)
      out << "e " << num(e.wall) << " " << num(e.audio) << " " << num(e.compute) << " " << e.committed << " "
          << e.provisional << "\n";
    for (const CommittedWord& w : t.words)
      out << "w " << num(w.word.start) << " " << num(w.word.end) << " " << num(w.word.probability) << " "
          << num(w.commit_wall) << " " << num(w.commit_audio) << " " << num(w.first_seen_wall) << " "
          << num(w.first_seen_audio) << " " << escape(w.word.text) << "\n";
    out << "text " << escape(t.text) << "\n";
    if (!r.error.empty()) out << "error " << escape(r.error) << "\n";
  }
  out << "end\n";
}

SystemRun read_run(std::istream& in) {
  SystemRun run;
  std::string line;
  int number = 0;
  bool ended = false;
  auto bad = [&](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument, "run trace line " + std::to_string(number) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++number;
    std::istringstream f(line);
    std::string tag;
    f >> tag;
    if (number == 1) {
      if (line != "earshot-run 1") throw bad("expected header 'earshot-run 1', got '" + line + "'");
      continue;
    }
    if (tag == "stats") {
      int available = 0;
      f >> available >> run.stats.encoder_passes >> run.stats.encoder_seconds >> run.stats.decoder_calls >>
          run.stats.decoder_seconds;
      run.stats.available = available != 0;
    } else if (tag == "elapsed") {
      f >> run.elapsed_wall;
    } else if (tag == "stream") {
      StreamRecord r;
      f >> r.file >> r.session >> r.trace.audio_seconds >> r.trace.elapsed_wall >> r.trace.compute_wall;
      run.streams.push_back(std::move(r));
    } else if (tag == "e" || tag == "w" || tag == "text" || tag == "error") {
      if (run.streams.empty()) throw bad("'" + tag + "' before any 'stream'");
      StreamRecord& r = run.streams.back();
      if (tag == "e") {
        Emission e;
        f >> e.wall >> e.audio >> e.compute >> e.committed >> e.provisional;
        r.trace.emissions.push_back(e);
      } else if (tag == "w") {
        CommittedWord w;
        f >> w.word.start >> w.word.end >> w.word.probability >> w.commit_wall >> w.commit_audio >> w.first_seen_wall >>
            w.first_seen_audio;
        w.word.text = unescape(rest_after(line, 8));
        r.trace.words.push_back(std::move(w));
      } else if (tag == "text") {
        r.trace.text = unescape(rest_after(line, 1));
      } else {
        r.error = unescape(rest_after(line, 1));
      }
    } else if (tag == "end") {
      ended = true;
      break;
    } else {
      throw bad("unknown record '" + tag + "'");
    }
    if (f.fail()) throw bad("malformed numbers in '" + line + "'");
  }
  if (!ended) throw bad("trace ends without 'end' (the child process stopped early?)");
  return run;
}

void write_audio_file(const std::filesystem::path& path, const std::vector<std::vector<float>>& audio) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t count = audio.size();
  out.write(reinterpret_cast<const char*>(&count), sizeof count);
  for (const auto& a : audio) {
    const uint64_t n = a.size();
    out.write(reinterpret_cast<const char*>(&n), sizeof n);
    out.write(reinterpret_cast<const char*>(a.data()), static_cast<std::streamsize>(n * sizeof(float)));
  }
  if (!out) throw Error(ErrorCode::kIo, "cannot write " + path.string());
}

std::vector<std::vector<float>> read_audio_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, "cannot open " + path.string());
  const auto size = std::filesystem::file_size(path);
  uint64_t count = 0;
  in.read(reinterpret_cast<char*>(&count), sizeof count);
  std::vector<std::vector<float>> audio;
  uint64_t used = sizeof count;
  for (uint64_t i = 0; in && i < count; ++i) {
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), sizeof n);
    used += sizeof n + n * sizeof(float);
    if (!in || used > size) throw Error(ErrorCode::kIo, path.string() + " is truncated");
    std::vector<float> a(n);
    in.read(reinterpret_cast<char*>(a.data()), static_cast<std::streamsize>(n * sizeof(float)));
    audio.push_back(std::move(a));
  }
  if (!in) throw Error(ErrorCode::kIo, path.string() + " is truncated");
  return audio;
}

}  // namespace earshot::bench
