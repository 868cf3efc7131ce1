// What operator new allocates in a test program, on every thread: the largest
// single allocation and the bytes of all of them since the last reset. For tests
// that code makes no large buffer (a decoder refusing a header before decoding,
// stopping at its output limit). A test program that uses it links
// allocation_probe.cpp, which replaces the global operator new and delete
// (malloc and free underneath; sanitizers intercept those as usual). Memory that
// C libraries allocate themselves (FFmpeg's av_malloc) is not seen.
#pragma once

#include <cstddef>

namespace earshot::testing {

struct AllocationFigures {
  size_t largest = 0;  // bytes of the largest single allocation
  size_t total = 0;    // bytes of all allocations
};

void reset_allocation_figures();
AllocationFigures allocation_figures();

}  // namespace earshot::testing
