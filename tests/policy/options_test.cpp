// The policies' option groups (policy/options.h): every command that loads a
// model gets every group's options, their defaults are the policies' own, a value
// reaches its policy's settings and nothing else, an option a command does not
// run is refused, and a bad value is refused naming the option.
#include "policy/options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"

namespace earshot::policy {
namespace {

constexpr CommandKind kCommands[] = {CommandKind::kServe, CommandKind::kTranscribe, CommandKind::kBench};

Settings read(CommandKind command, const std::vector<std::string>& argv, Settings settings = {}) {
  Args args("test", "");
  declare_options(args, command);
  args.parse(argv);
  read_options(args, command, settings);
  return settings;
}

std::string refusal(CommandKind command, const std::vector<std::string>& argv) {
  try {
    read(command, argv);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PolicyOptions, EveryGroupIsListedOnceWithBothSteps) {
  ASSERT_EQ(option_groups().size(), 3u);
  for (const OptionGroup& g : option_groups()) {
    EXPECT_STRNE(g.policy, "");
    EXPECT_NE(g.declare, nullptr);
    EXPECT_NE(g.read, nullptr);
  }
}

TEST(PolicyOptions, TheDefaultsAreThePoliciesOwn) {
  const Settings defaults;
  for (CommandKind command : kCommands) {
    const Settings s = read(command, {});
    EXPECT_EQ(s.alignatt.frame_threshold, defaults.alignatt.frame_threshold);
    EXPECT_EQ(s.alignatt.audio_max_len, defaults.alignatt.audio_max_len);
    EXPECT_EQ(s.alignatt.audio_min_len, defaults.alignatt.audio_min_len);
    EXPECT_EQ(s.alignatt.max_context_tokens, defaults.alignatt.max_context_tokens);
    EXPECT_EQ(s.alignatt.attention_window, defaults.alignatt.attention_window);
    EXPECT_EQ(s.alignatt.nonspeech_prob, defaults.alignatt.nonspeech_prob);
    EXPECT_EQ(s.alignatt.repetition_guard, defaults.alignatt.repetition_guard);
    EXPECT_EQ(s.alignatt.beams, defaults.alignatt.beams);
    EXPECT_EQ(s.alignatt.never_fire, defaults.alignatt.never_fire);
    EXPECT_EQ(s.prompted_alignatt.trim, defaults.prompted_alignatt.trim);
    EXPECT_EQ(s.prompted_rolling.unfixed_tokens, defaults.prompted_rolling.unfixed_tokens);
    EXPECT_EQ(s.prompted_rolling.unfixed_passes, defaults.prompted_rolling.unfixed_passes);
  }
}

TEST(PolicyOptions, AValueReachesItsPolicyAndKeepsTheRest) {
  Settings given;
  given.alignatt.language = "de";  // what a command sets itself (serve: its default language)
  given.alignatt.long_silence = 2.5;
  given.localagreement.long_silence = 2.5;
  const Settings s =
      read(CommandKind::kTranscribe,
           {"--frame-threshold", "10", "--beams", "3", "--attention-window", "16", "--guards", "off", "--never-fire",
            "--qwen3-trim", "sliding", "--rolling-unfixed-tokens", "7", "--rolling-unfixed-passes", "0"},
           given);
  EXPECT_EQ(s.alignatt.frame_threshold, 10);
  EXPECT_EQ(s.alignatt.beams, 3);
  EXPECT_EQ(s.alignatt.attention_window, 16);
  EXPECT_FALSE(s.alignatt.repetition_guard);
  EXPECT_TRUE(s.alignatt.never_fire);
  EXPECT_EQ(s.prompted_alignatt.trim, PromptedAlignAttConfig::Trim::kSliding);
  EXPECT_EQ(s.prompted_rolling.unfixed_tokens, 7);
  EXPECT_EQ(s.prompted_rolling.unfixed_passes, 0);
  EXPECT_EQ(s.alignatt.language, "de");
  EXPECT_EQ(s.alignatt.long_silence, 2.5);
  EXPECT_EQ(s.localagreement.long_silence, 2.5);
  // The fields no option names keep their values.
  EXPECT_EQ(s.prompted_alignatt.audio_max_len, Settings{}.prompted_alignatt.audio_max_len);
  EXPECT_EQ(s.rolling.commit.hold_back, Settings{}.rolling.commit.hold_back);
}

TEST(PolicyOptions, NeverFireIsTranscribesOnly) {
  EXPECT_TRUE(read(CommandKind::kTranscribe, {"--never-fire"}).alignatt.never_fire);
  for (CommandKind command : {CommandKind::kServe, CommandKind::kBench})
    EXPECT_THROW(read(command, {"--never-fire"}), Error);
}

TEST(PolicyOptions, ABadValueIsRefusedNamingTheOption) {
  for (CommandKind command : kCommands) {
    EXPECT_EQ(refusal(command, {"--guards", "maybe"}), "--guards must be on or off, got 'maybe'");
    EXPECT_EQ(refusal(command, {"--attention-window", "0"}), "--attention-window must be all or a count >= 1, got 0");
    EXPECT_EQ(refusal(command, {"--qwen3-trim", "fixed"}), "--qwen3-trim must be window or sliding, not 'fixed'");
    EXPECT_EQ(refusal(command, {"--rolling-unfixed-tokens", "-1"}),
              "--rolling-unfixed-tokens/--rolling-unfixed-passes: the unfixed tokens must be >= 0");
    EXPECT_NE(refusal(command, {"--beams", "0"}).find("beams must be in [1, 16]"), std::string::npos);
  }
}

}  // namespace
}  // namespace earshot::policy
