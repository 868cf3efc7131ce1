#include "policy/registry.h"

#include "common/error.h"
#include "common/text.h"
#include "policy/alignatt/alignatt_processor.h"
#include "policy/transducer/native_processors.h"

namespace earshot::policy {

namespace {

// A static prompt with the stream's vocabulary after it: an attention decoder
// reads keyterms as prompt text (SimulStreaming's static prompt). The prompt
// text as given (serve --static-init-prompt arrives here verbatim); a bare list
// of terms starts a word (a space first), as openai-whisper encodes a prompt.
std::string with_keyterms(const std::string& prompt, const Keyterms& keyterms) {
  std::string text = keyterms.prompt_text();
  if (text.empty()) return prompt;
  if (keyterms.prompt.empty() || !prompt.empty()) text = " " + text;
  return prompt + text;
}

// --- an attention decoder (AsrDecoder) ---

std::unique_ptr<OnlineProcessor> open_alignatt(std::unique_ptr<AsrDecoder> decoder, const Settings& settings,
                                               const StreamContext& stream) {
  AlignAttConfig config = settings.alignatt;
  config.language = stream.language;
  config.static_init_prompt = with_keyterms(config.static_init_prompt, stream.keyterms);
  if (stream.on_warning) config.on_warning = stream.on_warning;
  if (stream.on_trace) config.on_trace = stream.on_trace;
  return std::make_unique<AlignAttProcessor>(std::move(decoder), std::move(config));
}

std::unique_ptr<OnlineProcessor> open_localagreement(std::unique_ptr<AsrDecoder> decoder, const Settings& settings,
                                                     const StreamContext& stream) {
  LocalAgreementConfig config = settings.localagreement;
  config.language = stream.language;
  config.static_prompt = with_keyterms(config.static_prompt, stream.keyterms);
  return std::make_unique<LocalAgreementProcessor>(std::move(decoder), std::move(config));
}

constexpr Policy<AsrDecoder> kAttentionPolicies[] = {
    {"alignatt", "AlignAtt (SimulStreaming): words commit once the decoder's attention leaves the audio's end",
     open_alignatt, [](const Settings& s) { s.alignatt.validate(); }},
    {"localagreement", "LocalAgreement-2: words commit once two passes agree on them", open_localagreement,
     [](const Settings& s) { s.localagreement.validate(); }},
};

// --- a prompted audio-LLM decoder (PromptedAsrDecoder) ---

// The stream's vocabulary as system text after the configured context.
std::string with_context(const std::string& context, const Keyterms& keyterms) {
  const std::string text = keyterms.prompt_text();
  if (text.empty()) return context;
  return context.empty() ? text : context + "\n" + text;
}

std::unique_ptr<OnlineProcessor> open_prompted_alignatt(std::unique_ptr<PromptedAsrDecoder> decoder,
                                                        const Settings& settings, const StreamContext& stream) {
  PromptedAlignAttConfig config = settings.prompted_alignatt;
  config.language = stream.language;
  config.context = with_context(config.context, stream.keyterms);
  return std::make_unique<PromptedAlignAttProcessor>(std::move(decoder), std::move(config));
}

std::unique_ptr<OnlineProcessor> open_prompted_rolling(std::unique_ptr<PromptedAsrDecoder> decoder,
                                                       const Settings& settings, const StreamContext& stream) {
  commit::RevisingConfig config = settings.rolling;
  config.language = stream.language;
  commit::RollingConfig rolling = settings.prompted_rolling;
  if (const std::string text = stream.keyterms.prompt_text(); !text.empty()) rolling.context = text;
  return std::make_unique<commit::RevisingProcessor>(
      std::make_unique<commit::RollingDecoder>(std::move(decoder), std::move(rolling)), std::move(config));
}

constexpr Policy<PromptedAsrDecoder> kPromptedPolicies[] = {
    {"alignatt", "AlignAtt over the LLM's attention to its audio (WhisperLiveKit's qwen3_simul)",
     open_prompted_alignatt, [](const Settings& s) { s.prompted_alignatt.validate(); }},
    {"rolling", "the growing segment decoded every ~2 s, the stable/unstable commit layer commits what passes agree on",
     open_prompted_rolling,
     [](const Settings& s) {
       s.rolling.validate();
       s.prompted_rolling.validate();
     }},
};

// --- an offline transducer (Parakeet) ---

// The audio the model encodes at once: its family's setting, which both policies need.
double offline_window(const StreamContext& stream) {
  if (!(stream.window_seconds > 0))
    throw Error(ErrorCode::kInternal, "an offline transducer's policy needs the model's window (StreamContext)");
  return stream.window_seconds;
}

std::unique_ptr<OnlineProcessor> open_offline_rolling(std::unique_ptr<OfflineTransducer> model,
                                                      const Settings& settings, const StreamContext& stream) {
  commit::RevisingConfig config = settings.rolling;
  config.language = stream.language;
  config.max_segment_sec = offline_window(stream);
  return std::make_unique<commit::RevisingProcessor>(transducer_window_decoder(std::move(model), stream.language),
                                                     std::move(config));
}

std::unique_ptr<OnlineProcessor> open_offline_native(std::unique_ptr<OfflineTransducer> model,
                                                     const Settings& /*settings*/, const StreamContext& stream) {
  return native_transducer_processor(std::move(model), offline_window(stream), stream.language);
}

constexpr Policy<OfflineTransducer> kOfflineTransducerPolicies[] = {
    {"rolling", "the growing segment decoded every couple of seconds, the commit layer commits what passes agree on",
     open_offline_rolling, [](const Settings& s) { s.rolling.validate(); }},
    {"native", "each window decoded once when it is full, each word committed as the next starts", open_offline_native,
     [](const Settings&) {}},
};

// --- a cache-aware streaming transducer (Nemotron streaming, Voxtral Realtime) ---

std::unique_ptr<OnlineProcessor> open_streaming_native(std::unique_ptr<StreamingTransducer> model,
                                                       const Settings& /*settings*/, const StreamContext& stream) {
  return streaming_transducer_processor(std::move(model), stream.language);
}

constexpr Policy<StreamingTransducer> kStreamingTransducerPolicies[] = {
    {"native", "each chunk decoded as soon as its audio is in; words append-only", open_streaming_native,
     [](const Settings&) {}},
};

}  // namespace

template <>
std::span<const Policy<AsrDecoder>> policies_for<AsrDecoder>() {
  return kAttentionPolicies;
}
template <>
std::span<const Policy<PromptedAsrDecoder>> policies_for<PromptedAsrDecoder>() {
  return kPromptedPolicies;
}
template <>
std::span<const Policy<OfflineTransducer>> policies_for<OfflineTransducer>() {
  return kOfflineTransducerPolicies;
}
template <>
std::span<const Policy<StreamingTransducer>> policies_for<StreamingTransducer>() {
  return kStreamingTransducerPolicies;
}

void throw_unknown_policy(const std::string& name, const std::vector<std::string>& known) {
  throw Error(ErrorCode::kInvalidArgument, "unknown --policy '" + name + "' (use " + join_list(known) + ")");
}

}  // namespace earshot::policy
