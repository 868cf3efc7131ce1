// The streaming policies, each registered for the model interface it runs on:
// an attention decoder (model/asr_decoder.h: Whisper), a prompted audio-LLM
// decoder (model/prompted_asr.h: Qwen3-ASR), an offline or a cache-aware
// streaming transducer (model/transducer_stream.h: Parakeet, Nemotron, Voxtral
// Realtime). A family's engine builds the interface its model offers and opens
// a policy by name here; the policies a model offers are those registered for
// its interface, the first the default. A new policy is its folder plus one
// entry in registry.cpp; no family changes.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/keyterms.h"
#include "model/asr_decoder.h"
#include "model/prompted_asr.h"
#include "model/transducer_stream.h"
#include "policy/alignatt/alignatt_config.h"
#include "policy/alignatt/prompted_alignatt.h"
#include "policy/commit/revising_processor.h"
#include "policy/commit/rolling_decoder.h"
#include "policy/localagreement/local_agreement_processor.h"
#include "policy/online_processor.h"

namespace earshot::policy {

// The policies' settings every stream of a model starts from (model-neutral;
// each policy reads its own). The stream's language and callbacks come from
// StreamContext.
struct Settings {
  AlignAttConfig alignatt;                   // on an attention decoder
  LocalAgreementConfig localagreement;       // likewise
  PromptedAlignAttConfig prompted_alignatt;  // AlignAtt on an audio LLM (WhisperLiveKit's qwen3_simul)
  commit::RevisingConfig rolling = [] {      // rolling passes through the commit layer
    commit::RevisingConfig c;
    c.commit.hold_back = 6;  // WhisperLiveKit's stable-commit defaults: ~6 units held, 2 agreeing passes
    c.commit.agreeing_passes = 2;
    return c;
  }();
  commit::RollingConfig prompted_rolling;  // an audio LLM's rolling passes: the prefix each forces
  // Log-probability bonus per piece of a keyterm phrase at weight 1 (--keyterm-bonus),
  // for the families that boost phrases while decoding (transducers, Voxtral Realtime).
  double keyterm_bonus = 1.5;
};

// What a stream gives its policy besides the model.
struct StreamContext {
  std::string language = "auto";  // a code, or auto
  // The vocabulary to expect: the policies over prompted decoders put it in their
  // prompt (the families that boost it while decoding do so before the policy).
  Keyterms keyterms;
  // The most audio the model takes in one pass, in seconds: an offline
  // transducer's window, which its policies need (0 elsewhere).
  double window_seconds = 0;
  std::function<void(const std::string&)> on_warning;  // optional: per-pass warnings (loop guards...)
  std::function<void(const std::string&)> on_trace;    // optional: one JSON line per pass (AlignAtt's --trace)
};

// One policy over the model interface Model.
template <class Model>
struct Policy {
  const char* name;     // what --policy names it
  const char* summary;  // one line for help and docs
  std::unique_ptr<OnlineProcessor> (*open)(std::unique_ptr<Model> model, const Settings& settings,
                                           const StreamContext& stream);
  // Throws Error(kInvalidArgument) for settings this policy cannot run with.
  void (*validate)(const Settings& settings);
};

// The policies registered for each model interface, the default first.
template <class Model>
std::span<const Policy<Model>> policies_for();
template <>
std::span<const Policy<AsrDecoder>> policies_for<AsrDecoder>();
template <>
std::span<const Policy<PromptedAsrDecoder>> policies_for<PromptedAsrDecoder>();
template <>
std::span<const Policy<OfflineTransducer>> policies_for<OfflineTransducer>();
template <>
std::span<const Policy<StreamingTransducer>> policies_for<StreamingTransducer>();

// Their names, the default first (an engine's Capabilities::policies).
template <class Model>
std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (const Policy<Model>& p : policies_for<Model>()) names.emplace_back(p.name);
  return names;
}

// Validates the settings of every policy over Model: an engine calls it at load,
// so a bad setting fails there and not at the first stream.
template <class Model>
void validate_policies(const Settings& settings) {
  for (const Policy<Model>& p : policies_for<Model>()) p.validate(settings);
}

// Throws Error(kInvalidArgument): "unknown --policy 'NAME' (use A, B or C)".
[[noreturn]] void throw_unknown_policy(const std::string& name, const std::vector<std::string>& known);

// Opens the policy `name` over `model`. Throws Error(kInvalidArgument) naming
// the policies there are when none over Model has that name.
template <class Model>
std::unique_ptr<OnlineProcessor> open_policy(const std::string& name, std::unique_ptr<Model> model,
                                             const Settings& settings, const StreamContext& stream) {
  for (const Policy<Model>& p : policies_for<Model>())
    if (name == p.name) return p.open(std::move(model), settings, stream);
  throw_unknown_policy(name, policy_names<Model>());
}

}  // namespace earshot::policy
