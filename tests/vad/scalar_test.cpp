// Our ggml graph against an independent plain C++ implementation (slow: ~3 s).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/vad/scalar_silero.h"
#include "tests/vad/test_util.h"
#include "vad/vad.h"

namespace earshot::vad {
namespace {

using test::jfk;
using test::silero;

// Our graph against an independent double-precision implementation, in both
// context modes; the LSTM state carries over all 344 windows. The residual
// (~2e-4) comes from f16 roundings of conv inputs landing on the other side of
// a rounding boundary; a structural error (padding, gate order, context) moves
// probabilities by 1e-2 or more.
TEST(VadSession, MatchesScalarImplementationInBothContextModes) {
  for (WindowContext mode : {WindowContext::kReflect, WindowContext::kPreviousSamples}) {
    VadSession session(silero(), {.context = mode});
    std::vector<float> probs = session.push(jfk());
    probs.push_back(session.flush().value());
    test::ScalarSilero scalar(*silero());
    double max_diff = 0.0;
    for (size_t w = 0; w < probs.size(); ++w) {
      const double expected = scalar.step(test::padded_window(jfk(), w, mode));
      max_diff = std::max(max_diff, std::abs(probs[w] - expected));
      ASSERT_NEAR(probs[w], expected, 5e-4) << "window " << w << " mode " << static_cast<int>(mode);
    }
    std::printf("mode %d: max |p - p_scalar| = %.3g\n", static_cast<int>(mode), max_diff);
  }
}

}  // namespace
}  // namespace earshot::vad
