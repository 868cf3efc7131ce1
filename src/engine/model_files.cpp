#include "engine/model_files.h"

#include <exception>
#include <string>

#include "common/error.h"

namespace earshot::engine {

namespace {

const Family* family_reading(const std::vector<Family>& all, const ModelFile& file) {
  for (const Family& f : all)
    if (f.accepts(file)) return &f;
  return nullptr;
}

// "Whisper, FastConformer transducer, Voxtral Realtime": the families that quantise their files.
std::string quantised_families(const std::vector<Family>& all) {
  std::string names;
  for (const Family& f : all)
    if (f.quantize) names += (names.empty() ? "" : ", ") + (f.display_name.empty() ? f.name : f.display_name);
  return names;
}

}  // namespace

quantize::QuantizeReport quantize_model_file(const std::filesystem::path& in, const std::filesystem::path& out,
                                             ggml_type type) {
  const std::vector<Family> all = families();
  return quantize::write_quantized(in, out, type, [&](const std::filesystem::path& part, quantize::QuantizeReport& r) {
    const ModelFile file = probe_model_file(in);
    const Family* family = family_reading(all, file);
    if (!family)
      throw Error(ErrorCode::kUnsupported, "model file " + in.string() + " is " + file.description +
                                               ", not a model earshot quantises (" + quantised_families(all) + ")");
    if (!family->quantize)
      throw Error(ErrorCode::kUnsupported,
                  "model file " + in.string() + " is a " +
                      (family->display_name.empty() ? family->name : family->display_name) +
                      " model, which earshot quantize does not write (it quantises " + quantised_families(all) +
                      " models): take the quantised file its publisher offers, or quantise it with their tools");
    family->quantize(file, in, part, type, r);
  });
}

quantize::FileSummary summarize_model_file(const std::filesystem::path& path,
                                           const std::vector<FileSummarizer>& others) {
  try {
    const ModelFile file = probe_model_file(path);
    const std::vector<Family> all = families();
    if (const Family* family = family_reading(all, file)) {
      if (family->summarize) return family->summarize(file, path);
      return {family->display_name.empty() ? family->name : family->display_name, file.description, "-"};
    }
    for (const FileSummarizer& other : others)
      if (auto s = other(file, path)) return *s;
    return quantize::summarize_other_file(path);
  } catch (const std::exception& e) {
    return {"unreadable", e.what(), "-"};
  }
}

}  // namespace earshot::engine
