// Model passes as the engine reports them, whatever the family: the server's
// /metrics and the bench's compute figures observe these, so a family that does
// not go through AsrDecoder (a transducer) is measured the same way.
#pragma once

#include <chrono>
#include <functional>

namespace earshot {

enum class ModelPass { kEncoder, kDecoder };

// Called after each pass with its wall time (also when the pass threw: the time was spent).
using PassReport = std::function<void(ModelPass pass, std::chrono::nanoseconds elapsed)>;

}  // namespace earshot
