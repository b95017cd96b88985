// Batch: one mini-batch as the loader builds it and the model consumes it.
// Per table it holds the batch's unique keys (what is signalled, pulled and
// pushed) and, per row, the slot of the row's key among them (-1: missing).
//
// Thread safety: a plain value, built by the loader thread and then handed
// over whole to the trainer (no sharing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "strata/types.h"

namespace strata::train {

struct Batch {
  Clock clock = 0;  // the trainer's clock when it runs this batch
  uint32_t epoch = 0;
  bool train = true;                          // false: validation (forward only)
  std::vector<uint32_t> rows;                 // dataset row ids
  std::vector<float> labels;                  // rows.size()
  std::vector<float> dense;                   // rows.size() * dense columns
  std::vector<std::vector<Key>> unique_keys;  // per table
  std::vector<int32_t> slots;  // rows.size() * tables: index into unique_keys[t] or -1

  size_t size() const { return rows.size(); }
  size_t tables() const { return unique_keys.size(); }
  int32_t Slot(size_t row, size_t table) const { return slots[row * tables() + table]; }
};

}  // namespace strata::train
