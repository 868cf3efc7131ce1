#include "bench/dataset.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "common/error.h"

namespace earshot::bench {
namespace fs = std::filesystem;
namespace {

const std::set<std::string> kAudioExtensions = {".wav", ".mp3", ".flac", ".ogg", ".opus", ".webm", ".m4a", ".aac"};

bool read_text(const fs::path& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return !in.bad();
}

std::string lower_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

Dataset from_manifest(const fs::path& manifest) {
  Dataset d;
  std::string text;
  if (!read_text(manifest, text)) throw Error(ErrorCode::kIo, "cannot read manifest " + manifest.string());
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    const std::string where = manifest.string() + ":" + std::to_string(number);
    if (tab == std::string::npos) {
      d.problems.push_back(where + ": expected AUDIO<TAB>REFERENCE, found no tab; line skipped");
      continue;
    }
    fs::path audio = manifest.parent_path() / line.substr(0, tab);
    if (!fs::is_regular_file(audio)) {
      d.problems.push_back(where + ": audio file " + audio.string() + " does not exist; line skipped");
      continue;
    }
    d.utterances.push_back(Utterance{audio.stem().string(), audio.string(), line.substr(tab + 1), 0});
  }
  return d;
}

Dataset from_folder(const fs::path& folder) {
  Dataset d;
  std::vector<fs::path> audio_files;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    if (kAudioExtensions.count(lower_extension(it->path()))) audio_files.push_back(it->path());
  }
  if (ec) throw Error(ErrorCode::kIo, "cannot list dataset folder " + folder.string() + ": " + ec.message());
  std::sort(audio_files.begin(), audio_files.end());
  for (const fs::path& audio : audio_files) {
    fs::path reference = audio;
    reference.replace_extension(".txt");
    std::string text;
    if (!fs::exists(reference)) {
      d.problems.push_back(audio.string() + ": no reference transcript " + reference.filename().string() +
                           " next to it; file skipped");
      continue;
    }
    if (!read_text(reference, text)) {
      d.problems.push_back(reference.string() + ": cannot read the reference transcript; file skipped");
      continue;
    }
    d.utterances.push_back(Utterance{audio.stem().string(), audio.string(), text, 0});
  }
  return d;
}

}  // namespace

Dataset load_dataset(const fs::path& path) {
  if (!fs::exists(path)) throw Error(ErrorCode::kIo, "dataset " + path.string() + " does not exist");
  Dataset d;
  if (fs::is_directory(path)) {
    d = fs::is_regular_file(path / "manifest.tsv") ? from_manifest(path / "manifest.tsv") : from_folder(path);
  } else {
    d = from_manifest(path);
  }
  for (Utterance& u : d.utterances) {
    // References are single-line transcripts; newlines inside are word breaks.
    std::replace(u.reference.begin(), u.reference.end(), '\n', ' ');
    std::replace(u.reference.begin(), u.reference.end(), '\r', ' ');
  }
  if (d.utterances.empty()) {
    std::string message = "dataset " + path.string() +
                          " holds no usable utterance (expected audio files with same-name .txt references, "
                          "or a manifest of AUDIO<TAB>REFERENCE lines)";
    for (const std::string& p : d.problems) message += "\n  " + p;
    throw Error(ErrorCode::kInvalidArgument, message);
  }
  return d;
}

std::vector<std::string> load_reference_translations(const std::vector<Utterance>& utterances,
                                                     const std::string& language) {
  std::vector<std::string> out;
  for (const Utterance& u : utterances) {
    fs::path path = u.audio_path;
    path.replace_extension("." + language + ".txt");
    std::string text;
    if (!fs::is_regular_file(path) || !read_text(path, text)) text.clear();
    std::replace(text.begin(), text.end(), '\n', ' ');
    std::replace(text.begin(), text.end(), '\r', ' ');
    out.push_back(std::move(text));
  }
  return out;
}

}  // namespace earshot::bench
