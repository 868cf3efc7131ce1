// The one RTTM writer (transcribe's --format rttm and the DER scorer's files).
#include "protocol/rttm.h"

#include <gtest/gtest.h>

#include <limits>

#include "common/error.h"
#include "protocol/transcript.h"

namespace earshot::protocol {
namespace {

TEST(RttmWriter, WritesSpeakerRecordsAtTheGivenPrecision) {
  const std::vector<RttmSegment> segs = {{"talk", "1", 0.5, 1.25, "S1"}, {"talk", "2", 2, 0.75, "S2"}};
  EXPECT_EQ(format_rttm(segs, kRttmMilliseconds),
            "SPEAKER talk 1 0.500 1.250 <NA> <NA> S1 <NA> <NA>\n"
            "SPEAKER talk 2 2.000 0.750 <NA> <NA> S2 <NA> <NA>\n");
  EXPECT_EQ(format_rttm(segs),  // microseconds by default
            "SPEAKER talk 1 0.500000 1.250000 <NA> <NA> S1 <NA> <NA>\n"
            "SPEAKER talk 2 2.000000 0.750000 <NA> <NA> S2 <NA> <NA>\n");
  EXPECT_EQ(format_rttm({}), "");
}

// Start and end are rounded, the duration is their difference: a turn that
// ends where the next starts still touches it after rounding (rounding the
// duration on its own would leave 0.0004 + 0.0012 -> 0.000 + 0.001, a gap of
// a millisecond before the next turn at 0.002).
TEST(RttmWriter, RoundsTheEndsSoTouchingTurnsStayTouching) {
  const std::vector<RttmSegment> segs = {{"f", "1", 0.0004, 0.0012, "A"}, {"f", "1", 0.0016, 0.001, "B"}};
  EXPECT_EQ(format_rttm(segs, kRttmMilliseconds),
            "SPEAKER f 1 0.000 0.002 <NA> <NA> A <NA> <NA>\n"
            "SPEAKER f 1 0.002 0.001 <NA> <NA> B <NA> <NA>\n");
}

TEST(RttmWriter, RefusesFieldsThatAreNotOneWordAndBadTimes) {
  auto refused = [](const RttmSegment& s) {
    try {
      format_rttm({s});
    } catch (const Error& e) {
      return e.code() == ErrorCode::kInvalidArgument;
    }
    return false;
  };
  EXPECT_TRUE(refused({"two words", "1", 0, 1, "A"}));
  EXPECT_TRUE(refused({"", "1", 0, 1, "A"}));
  EXPECT_TRUE(refused({"f", "1", 0, 1, "S 1"}));
  EXPECT_TRUE(refused({"f", "", 0, 1, "A"}));
  EXPECT_TRUE(refused({"f", "1", -1, 1, "A"}));
  EXPECT_TRUE(refused({"f", "1", 0, -0.5, "A"}));
  EXPECT_TRUE(refused({"f", "1", 0, std::numeric_limits<double>::infinity(), "A"}));
}

// Transcript segments become records of their speakers, to the millisecond;
// segments without a speaker are left out.
TEST(RttmWriter, TranscriptSegmentsWithSpeakers) {
  const std::vector<Segment> segments = {{0.0, 1.5, " Hello.", 1}, {1.5, 2.0, " um", -1}, {2.0, 3.25, " Hi.", 2}};
  EXPECT_EQ(format_rttm(segments, "call"),
            "SPEAKER call 1 0.000 1.500 <NA> <NA> S1 <NA> <NA>\n"
            "SPEAKER call 1 2.000 1.250 <NA> <NA> S2 <NA> <NA>\n");
}

}  // namespace
}  // namespace earshot::protocol
