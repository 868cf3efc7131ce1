#include "model/timed_decoder.h"

#include <gtest/gtest.h>

#include "bench/pass_stats.h"
#include "common/error.h"

namespace earshot::bench {
namespace {

// Records what reaches it, so forwarding is checked along with the counting.
class RecordingDecoder : public AsrDecoder {
 public:
  const AsrText& text() const override { throw Error(ErrorCode::kInternal, "not needed"); }
  int n_text_ctx() const override { return 448; }
  int n_alignment_heads() const override { return 6; }
  double frames_per_second() const override { return 50; }
  int max_samples() const override { return 480000; }
  int encode(std::span<const float> pcm) override { return static_cast<int>(pcm.size() / 320); }
  void reset(int n) override { sequences = n; }
  int n_past() const override { return past; }
  void rollback(int n) override { past = n; }
  void reorder(std::span<const int> source) override { reordered = source.size(); }
  DecodeResult decode(const DecodeRequest& request) override {
    past += static_cast<int>(request.tokens.at(0).size());
    DecodeResult r;
    r.n_tokens = static_cast<int>(request.tokens.at(0).size());
    return r;
  }
  std::vector<float> detect_language() override { return {0.25f, 0.75f}; }
  int sequences = 0, past = 0;
  size_t reordered = 0;
};

TEST(PassStats, CountsPassesAndDecoderCallsOfATimedDecoderThatForwardsEverything) {
  auto stats = std::make_shared<ComputeStats>();
  auto inner = std::make_unique<RecordingDecoder>();
  RecordingDecoder* raw = inner.get();
  TimedDecoder d(std::move(inner), count_passes(stats));
  EXPECT_TRUE(stats->available);
  std::vector<float> pcm(16000);
  EXPECT_EQ(d.encode(pcm), 50);
  EXPECT_EQ(d.encode(pcm), 50);
  d.reset(2);
  EXPECT_EQ(raw->sequences, 2);
  DecodeRequest req;
  req.tokens = {{1, 2, 3}, {1, 2, 3}};
  EXPECT_EQ(d.decode(req).n_tokens, 3);
  req.tokens = {{4}, {5}};
  d.decode(req);
  EXPECT_EQ(d.n_past(), 4);
  d.rollback(1);
  EXPECT_EQ(raw->past, 1);
  const int source[] = {1, 1};
  d.reorder(source);
  EXPECT_EQ(raw->reordered, 2u);
  EXPECT_EQ(d.detect_language(), (std::vector<float>{0.25f, 0.75f}));
  EXPECT_EQ(d.n_text_ctx(), 448);
  EXPECT_EQ(d.max_samples(), 480000);
  EXPECT_EQ(stats->encoder_passes, 2);
  EXPECT_EQ(stats->decoder_calls, 3);  // two decodes and one language detection
  EXPECT_GE(stats->encoder_seconds, 0.0);
  EXPECT_GE(stats->decoder_seconds, 0.0);
}

}  // namespace
}  // namespace earshot::bench
