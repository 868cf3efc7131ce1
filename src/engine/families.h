// The registry of model families: each family (a folder under engine/, one line
// in families.cpp) says which files it reads (from the file itself: legacy ggml
// magic, GGUF general.architecture), declares and reads its own command-line
// options into the spec, and loads an Engine. Tests register fakes of their own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "engine/engine.h"
#include "engine/model_spec.h"
#include "model/quantize/quantize.h"
#include "model/registry.h"
#include "model/runtime/model_file.h"

namespace earshot::engine {

// What a file is (kind, GGUF architecture, a description for errors): runtime::probe_model_file.
using ModelFile = runtime::ModelFileProbe;
using runtime::ModelFileKind;
using runtime::probe_model_file;

// Policies a kind of model of the family offers, for the commands' --policy help.
struct PolicyOffer {
  std::string models;                 // "Whisper", "Nemotron streaming"
  std::vector<std::string> policies;  // the first is the default
};

struct Family {
  std::string name;                               // "whisper"
  std::function<bool(const ModelFile&)> accepts;  // whether this family reads the file
  std::function<std::shared_ptr<const Engine>(const ModelSpec&)> load;

  // The rest is optional.
  std::string display_name;         // "Whisper": messages call a file of it "a Whisper model (family whisper)"
  std::vector<PolicyOffer> offers;  // for --policy's help, in this order
  // Declares the family's own options (names, help, defaults) on `command`'s table.
  std::function<void(Args& args, CommandKind command)> declare_options;
  // Reads and validates them into the spec (ModelSpec::options<T>()); throws
  // Error(kInvalidArgument) naming the option. Every family's options are read,
  // whatever the model file turns out to be.
  std::function<void(const Args& args, CommandKind command, ModelSpec& spec)> read_options;
  // What the family's settings in `spec` ask that a model of another family cannot
  // do, given what the file is ("a Whisper model (family whisper)"); "" when
  // nothing. engine::load refuses such a load with it rather than ignore it.
  std::function<std::string(const ModelSpec& spec, const std::string& file_is)> foreign_request;
  // How a model of the family runs with `spec` and `policy`, for reports (bench's
  // detail line): "libllama + libmtmd, mel frames mtmd, greedy".
  std::function<std::string(const ModelSpec& spec, const std::string& policy)> describe;
  // The family's files published under a name, each with where it is and how a
  // download of it is checked: `earshot pull NAME`, `--model NAME`, `earshot
  // models` (engine/catalogue.h gathers them).
  std::function<std::vector<models::ModelInfo>()> catalogue;
  // `earshot quantize`: writes `out` from `in` (a file the family accepts) with
  // its matrices in `type`, filling the report; throws Error naming what it
  // refuses. None: the family's files are quantised by the tools of the project
  // that publishes them.
  std::function<void(const ModelFile& file, const std::filesystem::path& in, const std::filesystem::path& out,
                     ggml_type type, quantize::QuantizeReport& report)>
      quantize;
  // `earshot models`: what a file the family accepts is (its layout, the types of its matrices).
  std::function<quantize::FileSummary(const ModelFile& file, const std::filesystem::path& path)> summarize;
};

// Adds a family; a later registration with the same name replaces the earlier.
void register_family(Family family);
std::vector<std::string> family_names();
// Every registered family, in registry order (the built-in ones first).
std::vector<Family> families();
// The name of the first family that reads the file at `path` ("" when none does);
// reads only what probe_model_file reads (a header), never the weights.
std::string family_of(const std::filesystem::path& path);

// Loads spec.path with the first family that accepts it. Throws
// earshot::Error(kInvalidArgument) for spec.runtime.threads < 1 (before reading
// the file) or for another family's settings the file's family cannot honour
// (Family::foreign_request) or for RuntimeOptions::batch_streams where the loaded
// engine does not batch (Capabilities::batch_streams), Error(kUnsupported) naming what the file is when no
// family reads it, and the family's own errors (kInvalidModel, kIo) otherwise.
std::shared_ptr<const Engine> load(const ModelSpec& spec);

// How a model of family `family` runs with `spec` and `policy` (Family::describe); "" when it does not say.
std::string describe(const std::string& family, const ModelSpec& spec, const std::string& policy);

}  // namespace earshot::engine
