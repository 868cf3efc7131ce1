// The command-line parser every subcommand uses: values, flags, defaults, and the
// errors a user gets for what a command does not take.
#include "common/command_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"

namespace earshot {
namespace {

Args make_args() {
  Args args("earshot demo", "earshot demo --model M [FILE...]");
  args.option("model", "model file").option("chunk", "seconds per piece", "0.5").flag("realtime", "pace input");
  return args;
}

std::string error_of(Args& args, const std::vector<std::string>& argv, const ArgsRules& rules = {}) {
  try {
    args.parse_or_help(argv, rules);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(CommandLine, ValuesFlagsAndDefaults) {
  Args args = make_args();
  ASSERT_TRUE(args.parse_or_help({"--model", "m.bin", "--realtime", "a.wav", "--chunk=0.25"},
                                 {.required = {}, .positional = true}));
  EXPECT_EQ(args.get("model"), "m.bin");
  EXPECT_DOUBLE_EQ(args.get_double("chunk"), 0.25);
  EXPECT_TRUE(args.get_flag("realtime"));
  EXPECT_EQ(args.positional(), std::vector<std::string>{"a.wav"});

  Args defaults = make_args();
  ASSERT_TRUE(defaults.parse_or_help({}));
  EXPECT_FALSE(defaults.has("chunk"));
  EXPECT_EQ(defaults.get("chunk"), "0.5");
  EXPECT_FALSE(defaults.get_flag("realtime"));
}

TEST(CommandLine, AnOnOffOptionIsOnOrOffAndNothingElse) {
  Args args("earshot demo", "earshot demo");
  args.option("lend", "lend cores", "on").option("stop", "stop passes", "on").option("odd", "odd", "on");
  ASSERT_TRUE(args.parse_or_help({"--stop", "off", "--odd", "yes"}));
  EXPECT_TRUE(args.get_on_off("lend"));
  EXPECT_FALSE(args.get_on_off("stop"));
  try {
    args.get_on_off("odd");
    ADD_FAILURE() << "--odd yes was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "--odd must be on or off, not 'yes'");
  }
}

TEST(CommandLine, HelpIsPrintedAndParsingStops) {
  Args args = make_args();
  ::testing::internal::CaptureStdout();
  // --help wins over rules a bare `--help` cannot meet (a required option, no positional allowed).
  const bool go_on = args.parse_or_help({"stray", "--help"}, {.required = {"model"}});
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_FALSE(go_on);
  EXPECT_NE(printed.find("usage: earshot demo --model M"), std::string::npos) << printed;
  EXPECT_NE(printed.find("--chunk VALUE"), std::string::npos) << printed;
  EXPECT_NE(printed.find("(default: 0.5)"), std::string::npos) << printed;
}

TEST(CommandLine, PositionalArgumentsOnlyWhereTheCommandTakesThem) {
  Args args = make_args();
  EXPECT_EQ(error_of(args, {"--model", "m", "extra.wav"}),
            "earshot demo: unexpected argument 'extra.wav' (see --help)");
  Args allowed = make_args();
  EXPECT_EQ(error_of(allowed, {"--model", "m", "extra.wav"}, {.required = {}, .positional = true}), "");
}

TEST(CommandLine, RequiredOptionsMustBeGivenAValue) {
  Args missing = make_args();
  EXPECT_EQ(error_of(missing, {"--chunk", "1"}, {.required = {"model"}}),
            "earshot demo: --model is required (see --help)");
  Args empty = make_args();
  EXPECT_EQ(error_of(empty, {"--model="}, {.required = {"model"}}), "earshot demo: --model is required (see --help)");
  Args given = make_args();
  EXPECT_EQ(error_of(given, {"--model", "m"}, {.required = {"model"}}), "");
}

TEST(CommandLine, UnknownOptionsAndMissingValuesAreNamed) {
  Args unknown = make_args();
  EXPECT_EQ(error_of(unknown, {"--modle", "m"}), "earshot demo: unknown option --modle (see --help)");
  Args no_value = make_args();
  EXPECT_EQ(error_of(no_value, {"--model"}), "earshot demo: --model needs a value");
  Args flag_value = make_args();
  EXPECT_EQ(error_of(flag_value, {"--realtime=yes"}), "earshot demo: --realtime takes no value");
}

}  // namespace
}  // namespace earshot

namespace earshot {
namespace {

TEST(CommandLine, ListValuesSplitAtCommasWithoutSpacesOrEmptyItems) {
  EXPECT_EQ(split_list("a, b,,c "), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(split_list("one"), (std::vector<std::string>{"one"}));
  EXPECT_TRUE(split_list("").empty());
  EXPECT_TRUE(split_list(" , ,").empty());
  EXPECT_EQ(split_list(",x,"), (std::vector<std::string>{"x"}));
}

}  // namespace
}  // namespace earshot
