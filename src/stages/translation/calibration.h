// Which attention heads align target to source, per (model, direction): the
// calibration registry of WhisperLiveKit #426. Keys are normalised model ids (no
// organisation prefix, no quantisation suffix, lower case), so one entry serves
// every quantisation and runtime of a model; an entry may disable quantisations
// whose alignment was measured to break. Shipped entries hold what is published
// for Hy-MT2-1.8B; user files add or override entries.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/llm/llm_backend.h"

namespace earshot::stages::translation {

struct CalibrationEntry {
  std::string model;   // normalised id ("hy-mt2-1.8b")
  std::string source;  // language code ("zh")
  std::string target;
  std::vector<llm::AttentionHead> heads;     // best first
  std::vector<std::string> disabled_quants;  // "4bit", "q4_k_m", ...
};

// "tencent/Hy-MT2-1.8B-GGUF/Hy-MT2-1.8B-Q4_K_M.gguf" -> "hy-mt2-1.8b".
std::string normalize_model_id(std::string_view id);
// The quantisation named by the id's suffix ("q4_k_m", "8bit", "f16"), "" if none.
std::string quantization_of(std::string_view id);

// One entry as JSON: {"model": ..., "source": ..., "target": ..., "heads":
// [[layer, head], ...], "disabled_quants": [...]}; a file holds one entry, a
// list of them, or {"entries": [...]}.
std::vector<CalibrationEntry> parse_calibration_json(std::string_view text);
std::string calibration_json(const CalibrationEntry& entry);

class CalibrationRegistry {
 public:
  // With the shipped entries.
  static CalibrationRegistry builtin();
  // Adds the entries of a file (throws Error(kInvalidArgument) naming the file
  // when it cannot be read or parsed); a later entry replaces an earlier one.
  void load_file(const std::string& path);
  void add(CalibrationEntry entry);

  struct Lookup {
    std::optional<CalibrationEntry> entry;  // set when simultaneous mode may run
    std::string reason;                     // why not, otherwise
  };
  // `model_id` as the model names itself (any prefix or suffix).
  Lookup find(std::string_view model_id, std::string_view source, std::string_view target) const;
  const std::vector<CalibrationEntry>& entries() const { return entries_; }

 private:
  std::vector<CalibrationEntry> entries_;
};

}  // namespace earshot::stages::translation
