// The small text helpers of common/text.h.
#include "common/text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace earshot {
namespace {

TEST(Text, AListReadsAsAMessageWouldSayIt) {
  EXPECT_EQ(join_list({}), "");
  EXPECT_EQ(join_list({"a"}), "a");
  EXPECT_EQ(join_list({"a", "b"}), "a or b");
  EXPECT_EQ(join_list({"a", "b", "c"}), "a, b or c");
  EXPECT_EQ(join_list({"a", "b", "c"}, ", "), "a, b, c");
}

TEST(Text, TrimAndWholeNumbers) {
  EXPECT_EQ(trim("  x y \n"), "x y");
  EXPECT_EQ(parse_whole_number("42", 0, 100), 42);
  EXPECT_FALSE(parse_whole_number("4.2", 0, 100));
  EXPECT_FALSE(parse_whole_number("101", 0, 100));
}

}  // namespace
}  // namespace earshot
