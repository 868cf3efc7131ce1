// The global operator new and delete of a test program that counts allocations
// (allocation_probe.h). Every replaceable form but the aligned ones, which keep
// the library's own (they allocate with aligned_alloc, not through these).
#include "allocation_probe.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace earshot::testing {
namespace {

std::atomic<size_t> largest{0};
std::atomic<size_t> total{0};

void* allocate(size_t size) noexcept {
  total.fetch_add(size, std::memory_order_relaxed);
  size_t seen = largest.load(std::memory_order_relaxed);
  while (size > seen && !largest.compare_exchange_weak(seen, size, std::memory_order_relaxed)) {
  }
  return std::malloc(size == 0 ? 1 : size);
}

void* allocate_or_throw(size_t size) {
  void* p = allocate(size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void reset_allocation_figures() {
  largest.store(0);
  total.store(0);
}

AllocationFigures allocation_figures() { return {largest.load(), total.load()}; }

}  // namespace earshot::testing

void* operator new(size_t size) { return earshot::testing::allocate_or_throw(size); }
void* operator new[](size_t size) { return earshot::testing::allocate_or_throw(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept { return earshot::testing::allocate(size); }
void* operator new[](size_t size, const std::nothrow_t&) noexcept { return earshot::testing::allocate(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
