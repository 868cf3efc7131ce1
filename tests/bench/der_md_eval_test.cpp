// The DER scorer against NIST's md-eval.pl (Debian's sctk) on random
// reference/hypothesis pairs: every component must equal md-eval's within
// 0.01 s (it prints two decimals). Each case is its own file id in one RTTM
// pair, so one md-eval run (-a f: per file) scores them all. Collars 0.25 and
// 0, overlap scored (md-eval's default) and single-speaker regions only (-1).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../support/command.h"
#include "bench/der.h"

namespace earshot::bench {
namespace {
namespace fs = std::filesystem;

std::string find_md_eval() {
  if (const char* env = std::getenv("EARSHOT_MD_EVAL")) return env;
  const char* debian = "/usr/lib/sctk/bin/md-eval.pl";
  return fs::exists(debian) ? debian : "";
}

// md-eval's figures for one file, in seconds.
struct MdEval {
  double eval_time = -1, scored_time = -1, scored_speech = -1, missed_speech = -1, falarm_speech = -1,
         scored_speaker = -1, missed_speaker = -1, falarm_speaker = -1, speaker_error = -1;
};

// Runs md-eval.pl with `flags`; per-file figures by file id.
std::map<std::string, MdEval> run_md_eval(const fs::path& ref, const fs::path& hyp, const std::string& flags) {
  const std::string md_eval = find_md_eval();
  if (md_eval.empty()) {
    ADD_FAILURE() << "md-eval.pl not found (looked at $EARSHOT_MD_EVAL, /usr/lib/sctk/bin/md-eval.pl): "
                     "install Debian's sctk package (scripts/bootstrap.sh does)";
    return {};
  }
  const std::string command = "perl " + md_eval + " -r " + ref.string() + " -s " + hyp.string() + " " + flags + " -a f";
  const earshot::testing::CommandResult run = earshot::testing::run_command(command);
  EXPECT_EQ(run.status, 0) << command << "\n" << run.output;
  const std::string& output = run.output;
  std::map<std::string, MdEval> out;
  std::istringstream lines(output);
  std::string line, file;
  const std::string section = "*** Performance analysis for Speaker Diarization for f=";
  auto value = [&](const std::string& l, const std::string& label, double& into) {
    const size_t at = l.find(label + " =");
    if (at == std::string::npos || l.find_first_not_of(' ') != at) return;
    into = std::stod(l.substr(at + label.size() + 2));
  };
  while (std::getline(lines, line)) {
    if (line.rfind(section, 0) == 0) {
      file = line.substr(section.size());
      file = file.substr(0, file.find(' '));
      continue;
    }
    if (line.rfind("*** Performance analysis", 0) == 0) file.clear();  // the ALL section
    if (file.empty()) continue;
    MdEval& m = out[file];
    value(line, "EVAL TIME", m.eval_time);
    value(line, "SCORED TIME", m.scored_time);
    value(line, "SCORED SPEECH", m.scored_speech);
    value(line, "MISSED SPEECH", m.missed_speech);
    value(line, "FALARM SPEECH", m.falarm_speech);
    value(line, "SCORED SPEAKER TIME", m.scored_speaker);
    value(line, "MISSED SPEAKER TIME", m.missed_speaker);
    value(line, "FALARM SPEAKER TIME", m.falarm_speaker);
    value(line, "SPEAKER ERROR TIME", m.speaker_error);
  }
  if (out.empty()) ADD_FAILURE() << "md-eval printed no per-file scores:\n" << output;
  return out;
}

DerOptions options(double collar, bool score_overlap = true) {
  DerOptions o;
  o.collar = collar;
  o.score_overlap = score_overlap;
  return o;
}

double uniform(std::mt19937& rng, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

// Merges one speaker's overlapping segments (md-eval refuses them).
std::vector<SpeakerSegment> merge_per_speaker(std::vector<SpeakerSegment> segs) {
  std::sort(segs.begin(), segs.end(), [](const SpeakerSegment& a, const SpeakerSegment& b) {
    return std::tie(a.speaker, a.start) < std::tie(b.speaker, b.start);
  });
  std::vector<SpeakerSegment> out;
  for (const auto& s : segs) {
    if (!out.empty() && out.back().speaker == s.speaker && s.start <= out.back().end() + 1e-3) {
      out.back().duration = std::max(out.back().end(), s.end()) - out.back().start;
      continue;
    }
    out.push_back(s);
  }
  return out;
}

// One conversation: 1-4 reference speakers taking turns with pauses,
// overlaps, touching same-speaker segments and now and then a zero-length
// one; a hypothesis that follows it with shifted boundaries, relabelled and
// confused speakers, dropped turns and false alarms.
// Returns the conversation's nominal length.
double random_case(std::mt19937& rng, const std::string& file, std::vector<SpeakerSegment>& ref,
                   std::vector<SpeakerSegment>& hyp) {
  const int nref = 1 + static_cast<int>(rng() % 4), nhyp = 1 + static_cast<int>(rng() % 5);
  const double length = uniform(rng, 10, 60);
  std::vector<SpeakerSegment> r, h;
  for (int k = 0; k < nref; ++k) {
    double t = uniform(rng, 0, 5);
    while (t < length) {
      const double dur = (rng() % 40 == 0) ? 0.0 : uniform(rng, 0.8, 6);
      r.push_back({file, "1", t, dur, "R" + std::to_string(k)});
      t += dur + ((rng() % 8 == 0) ? 0.0 : uniform(rng, 0.2, 4 * nref));
    }
  }
  std::vector<int> label(static_cast<size_t>(nref));
  for (auto& l : label) l = static_cast<int>(rng() % static_cast<unsigned>(nhyp));
  for (const auto& s : r) {
    if (s.duration == 0 || rng() % 6 == 0) continue;  // dropped
    const double start = std::max(0.0, s.start + uniform(rng, -0.6, 0.6));
    const double end = s.end() + uniform(rng, -0.6, 0.6);
    if (end <= start + 0.05) continue;
    const int k = std::stoi(s.speaker.substr(1));
    const int speaker =
        (rng() % 7 == 0) ? static_cast<int>(rng() % static_cast<unsigned>(nhyp)) : label[static_cast<size_t>(k)];
    h.push_back({file, "1", start, end - start, "H" + std::to_string(speaker)});
  }
  for (int fa = static_cast<int>(rng() % 4); fa > 0; --fa) {
    const double start = uniform(rng, 0, length + 5);
    h.push_back({file, "1", start, uniform(rng, 0.1, 3), "H" + std::to_string(rng() % static_cast<unsigned>(nhyp))});
  }
  ref.insert(ref.end(), r.begin(), r.end());
  h = merge_per_speaker(h);
  hyp.insert(hyp.end(), h.begin(), h.end());
  return length;
}

// with_uem: each case evaluated over one or two ranges of it (md-eval's -u).
void compare_with_md_eval(std::string flags, DerOptions options, unsigned seed, bool with_uem = false) {
  std::mt19937 rng(seed);
  std::vector<SpeakerSegment> ref, hyp;
  std::string uem;
  constexpr int kCases = 150;
  for (int i = 0; i < kCases; ++i) {
    const std::string file = "case" + std::to_string(i);
    const double length = random_case(rng, file, ref, hyp);
    const double a = uniform(rng, 0, length / 3), b = uniform(rng, 2 * length / 3, length);
    char line[160];
    std::snprintf(line, sizeof line, "%s 1 %.6f %.6f\n", file.c_str(), a, b);
    uem += line;
    if (rng() % 2) {
      std::snprintf(line, sizeof line, "%s 1 %.6f %.6f\n", file.c_str(), b + uniform(rng, 0, 3), length + 6);
      uem += line;
    }
  }
  const fs::path dir =
      fs::temp_directory_path() / ("earshot-md-eval-" + std::to_string(::getpid()) + "-" + std::to_string(seed));
  fs::create_directories(dir);
  write_rttm(dir / "ref.rttm", ref);
  write_rttm(dir / "hyp.rttm", hyp);
  if (with_uem) {
    std::ofstream(dir / "all.uem") << uem;
    options.uem = read_uem(dir / "all.uem");
    flags += " -u " + (dir / "all.uem").string();
  }
  // Both sides read the same text: ours through read_rttm.
  const std::vector<SpeakerSegment> ref_read = read_rttm(dir / "ref.rttm"), hyp_read = read_rttm(dir / "hyp.rttm");
  const std::map<std::string, MdEval> theirs = run_md_eval(dir / "ref.rttm", dir / "hyp.rttm", flags);
  fs::remove_all(dir);
  ASSERT_EQ(theirs.size(), static_cast<size_t>(kCases));
  for (int i = 0; i < kCases; ++i) {
    const std::string file = "case" + std::to_string(i);
    std::vector<SpeakerSegment> r, h;
    std::copy_if(ref_read.begin(), ref_read.end(), std::back_inserter(r),
                 [&](const auto& s) { return s.file == file; });
    std::copy_if(hyp_read.begin(), hyp_read.end(), std::back_inserter(h),
                 [&](const auto& s) { return s.file == file; });
    const DerScore ours = score_der(r, h, options);
    ASSERT_TRUE(theirs.count(file)) << file;
    const MdEval& m = theirs.at(file);
    SCOPED_TRACE(file + " (md-eval " + flags + ")");
    constexpr double kTol = 0.0051;  // md-eval rounds to 0.01 s
    EXPECT_NEAR(ours.evaluated_time, m.eval_time, kTol);
    EXPECT_NEAR(ours.scored_time, m.scored_time, kTol);
    EXPECT_NEAR(ours.scored_speech, m.scored_speech, kTol);
    EXPECT_NEAR(ours.missed_speech, m.missed_speech, kTol);
    EXPECT_NEAR(ours.falarm_speech, m.falarm_speech, kTol);
    EXPECT_NEAR(ours.scored_speaker, m.scored_speaker, kTol);
    EXPECT_NEAR(ours.missed_speaker, m.missed_speaker, kTol);
    EXPECT_NEAR(ours.falarm_speaker, m.falarm_speaker, kTol);
    EXPECT_NEAR(ours.speaker_error, m.speaker_error, kTol);
  }
}

TEST(DerVsMdEval, CollarQuarterSecondOverlapScored) { compare_with_md_eval("-c 0.25", options(0.25), 1); }

TEST(DerVsMdEval, NoCollarOverlapScored) { compare_with_md_eval("-c 0", options(0), 2); }

TEST(DerVsMdEval, CollarQuarterSecondSingleSpeakerRegionsOnly) {
  compare_with_md_eval("-c 0.25 -1", options(0.25, false), 3);
}

TEST(DerVsMdEval, NoCollarSingleSpeakerRegionsOnly) { compare_with_md_eval("-c 0 -1", options(0, false), 4); }

TEST(DerVsMdEval, CollarQuarterSecondWithinUemRanges) { compare_with_md_eval("-c 0.25", options(0.25), 5, true); }

TEST(DerVsMdEval, NoCollarWithinUemRanges) { compare_with_md_eval("-c 0", options(0), 6, true); }

}  // namespace
}  // namespace earshot::bench
