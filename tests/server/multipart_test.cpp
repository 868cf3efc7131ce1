// parse_multipart on hostile bodies: defects found while fuzzing it (fuzz/targets/multipart.cpp,
// by libFuzzer or by reading the parser for the target), each kept as a regression.
#include "server/multipart.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error.h"

namespace earshot::testing {
namespace {

// (Found by reading.) A Content-Disposition of a million "xname=" used to cost a lower-casing of the
// whole header per candidate (quadratic: hours for a 6 MB upload). It parses now.
TEST(MultipartHostile, LongDispositionWithManyFalseMatchesParses) {
  std::string disposition = "form-data; ";
  for (int i = 0; i < 1000000; ++i) disposition += "xname=";
  disposition += "; name=\"file\"";
  const std::string body = "--B\r\nContent-Disposition: " + disposition + "\r\n\r\nabc\r\n--B--\r\n";
  const auto parts = server::parse_multipart("multipart/form-data; boundary=B", body);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].name, "file");
  EXPECT_EQ(parts[0].data, "abc");
}

// The refusal of another Content-Type quotes it: escaped and by a short prefix, so
// a NUL does not cut the message and a long header is not echoed back whole.
TEST(MultipartHostile, AnotherContentTypeIsQuotedEscapedAndShort) {
  try {
    server::parse_multipart(std::string("text/plain\0;\r\n", 14) + std::string(10000, 'x'), "");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "expected Content-Type multipart/form-data, got 'text/plain\\x00;\\x0D\\x0A" +
                                         std::string(50, 'x') + "...' (10014 bytes)");
  }
}

}  // namespace
}  // namespace earshot::testing
