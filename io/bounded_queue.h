// BoundedQueue: a fixed-capacity lock-free multi-producer multi-consumer
// queue (D. Vyukov's bounded MPMC design: one sequence number per cell).
// TryPush fails when full, TryPop when empty; neither blocks nor allocates.
// IoThreads uses one per I/O thread (many submitters, one consumer).
//
// Thread safety: every method may be called from any thread.
// REQUIRES: capacity is a power of two; T is trivially copyable.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <type_traits>

#include "base/assert.h"

namespace strata::io {

template <typename T>
class BoundedQueue {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  explicit BoundedQueue(size_t capacity) : cells_(new Cell[capacity]), mask_(capacity - 1) {
    STRATA_ASSERT(capacity >= 2 && (capacity & (capacity - 1)) == 0,
                  "BoundedQueue capacity must be a power of two");
    for (size_t i = 0; i < capacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }

  bool TryPush(const T& value) {
    size_t pos = push_pos_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[pos & mask_];
      size_t seq = cell.seq.load(std::memory_order_acquire);
      auto diff = static_cast<std::ptrdiff_t>(seq) - static_cast<std::ptrdiff_t>(pos);
      if (diff == 0) {
        if (push_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          cell.value = value;
          cell.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // full
      } else {
        pos = push_pos_.load(std::memory_order_relaxed);
      }
    }
  }

  bool TryPop(T* out) {
    size_t pos = pop_pos_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[pos & mask_];
      size_t seq = cell.seq.load(std::memory_order_acquire);
      auto diff = static_cast<std::ptrdiff_t>(seq) - static_cast<std::ptrdiff_t>(pos + 1);
      if (diff == 0) {
        if (pop_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          *out = cell.value;
          cell.seq.store(pos + mask_ + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // empty
      } else {
        pos = pop_pos_.load(std::memory_order_relaxed);
      }
    }
  }

  // True when nothing was pushed that is not yet popped (a racy snapshot:
  // exact only when no push or pop runs concurrently).
  bool Empty() const {
    return push_pos_.load(std::memory_order_seq_cst) == pop_pos_.load(std::memory_order_seq_cst);
  }
  size_t capacity() const { return mask_ + 1; }

 private:
  struct Cell {
    std::atomic<size_t> seq;
    T value;
  };
  std::unique_ptr<Cell[]> cells_;
  const size_t mask_;
  alignas(64) std::atomic<size_t> push_pos_{0};
  alignas(64) std::atomic<size_t> pop_pos_{0};
};

}  // namespace strata::io
