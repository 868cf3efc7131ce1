// UTF-8 validation and repair (common/utf8.h) at the edges RFC 3629 draws.
#include "common/utf8.h"

#include <gtest/gtest.h>

namespace earshot {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii\n"));
  EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9 \xE4\xB8\x96 \xF0\x9F\x98\x80"));  // 2, 3 and 4 bytes
  EXPECT_TRUE(is_valid_utf8("\xF4\x8F\xBF\xBF"));                           // U+10FFFF
  EXPECT_TRUE(is_valid_utf8(std::string_view("a\0b", 3)));
}

TEST(Utf8, RejectsMalformedSequences) {
  EXPECT_FALSE(is_valid_utf8("\x80"));              // a continuation byte alone
  EXPECT_FALSE(is_valid_utf8("\xC3"));              // cut short
  EXPECT_FALSE(is_valid_utf8("\xE4\xB8"));          // cut short
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xE0\x80\xAF"));      // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xFF"));
  EXPECT_FALSE(is_valid_utf8("\xC3\x28"));  // lead byte, then no continuation
}

TEST(Utf8, RepairReplacesEachBadByteAndKeepsTheRest) {
  EXPECT_EQ(to_valid_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(to_valid_utf8("x\xFFy"), "x\xEF\xBF\xBDy");
  EXPECT_EQ(to_valid_utf8("\xC3\x28"), "\xEF\xBF\xBD(");
  EXPECT_EQ(to_valid_utf8("\xE4\xB8"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80\xF0\x9F\x98\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xF0\x9F\x98\x80");
  EXPECT_TRUE(is_valid_utf8(to_valid_utf8("\x80\xC0\xAF\xF4\x90\x80\x80 ok")));
}

TEST(Utf8, PrefixCutsAtACharacterBoundaryAndRepairs) {
  EXPECT_EQ(valid_utf8_prefix("short", 120), "short");
  EXPECT_EQ(valid_utf8_prefix("abcdef", 3), "abc");
  EXPECT_EQ(valid_utf8_prefix("ab\xE4\xB8\x96", 4), "ab");  // a 3-byte character is not cut in two
  EXPECT_EQ(valid_utf8_prefix("ab\xE4\xB8\x96", 5), "ab\xE4\xB8\x96");
  EXPECT_EQ(valid_utf8_prefix("a\xFF", 120), "a\xEF\xBF\xBD");  // invalid bytes replaced first
  EXPECT_EQ(valid_utf8_prefix("a\xFF", 3), "a");                // U+FFFD (3 bytes) does not fit
  std::string long_text(119, 'x');
  long_text += "\xF0\x9F\x98\x80";  // a 4-byte character across the 120-byte limit
  EXPECT_EQ(valid_utf8_prefix(long_text, 120), std::string(119, 'x'));
  EXPECT_TRUE(is_valid_utf8(valid_utf8_prefix(std::string(200, '\xC3'), 120)));
}

TEST(Utf8, QuoteClientTextEscapesControlsAndBadBytesSoNothingCutsTheMessage) {
  EXPECT_EQ(quote_client_text("fr"), "'fr'");
  EXPECT_EQ(quote_client_text(""), "''");
  // A NUL read through what() ended the message there; it is written out instead.
  const std::string q = quote_client_text(std::string_view("a\0b", 3));
  EXPECT_EQ(q, "'a\\x00b'");
  EXPECT_EQ(std::string(q.c_str()), q);
  EXPECT_EQ(quote_client_text("x\n\r\t\x1B[31m\x7F"), "'x\\x0A\\x0D\\x09\\x1B[31m\\x7F'");
  EXPECT_EQ(quote_client_text("x\x82y\xC3"), "'x\\x82y\\xC3'");  // not UTF-8: the bytes themselves
  EXPECT_EQ(quote_client_text("\xC2\x85|\xC2\x9F|\xC2\xA0"),
            "'\\u0085|\\u009F|\xC2\xA0'");               // C1 controls, then NBSP kept
  EXPECT_EQ(quote_client_text("a\\x00"), "'a\\\\x00'");  // a backslash the client sent cannot pass for an escape
  EXPECT_EQ(quote_client_text("caf\xC3\xA9 \xE4\xB8\x96"), "'caf\xC3\xA9 \xE4\xB8\x96'");
  EXPECT_TRUE(is_valid_utf8(quote_client_text("\xFF\xFE\x80\xED\xA0\x80")));
}

TEST(Utf8, QuoteClientTextKeepsAShortPrefixOfALongText) {
  const std::string big(1 << 20, 'A');
  EXPECT_EQ(quote_client_text(big), "'" + std::string(kMaxQuotedBytes, 'A') + "...' (1048576 bytes)");
  EXPECT_EQ(quote_client_text("abcdef", 6), "'abcdef'");
  EXPECT_EQ(quote_client_text("abcdefg", 6), "'abcdef...' (7 bytes)");
  // Cut at a character boundary: the 3-byte character that would cross the limit is left out whole.
  EXPECT_EQ(quote_client_text("ab\xE4\xB8\x96", 4), "'ab...' (5 bytes)");
  EXPECT_EQ(quote_client_text(std::string(100, '\0'), 2), "'\\x00\\x00...' (100 bytes)");
}

}  // namespace
}  // namespace earshot
