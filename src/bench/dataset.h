// A bench dataset: a folder of audio files with same-name .txt references (the
// layout of shared/data/librivox), or a manifest listing them. Manifest: a
// text file with one utterance per line, `AUDIO<TAB>REFERENCE TEXT` (AUDIO
// relative to the manifest's folder); empty lines and lines starting with '#'
// are ignored. A folder holding `manifest.tsv` uses it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "bench/metrics.h"

namespace earshot::bench {

struct Dataset {
  std::vector<Utterance> utterances;  // sorted by audio path (folder layout) or in manifest order
  std::vector<std::string> problems;  // one actionable message per skipped file
};

// Throws earshot::Error(kIo) when the folder/manifest itself cannot be read
// and kInvalidArgument when it holds no usable utterance (the problems are in
// the message); bad single files are skipped and listed in `problems`.
Dataset load_dataset(const std::filesystem::path& folder_or_manifest);

// Reference translations into `language` (bench --translate-to): the file
// AUDIO.LANG.txt next to each audio file (a.wav -> a.zh.txt), in either layout.
// One entry per utterance; "" where there is no such file.
std::vector<std::string> load_reference_translations(const std::vector<Utterance>& utterances,
                                                     const std::string& language);

}  // namespace earshot::bench
