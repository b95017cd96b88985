// GatedRowStore: a MemoryRowStore whose MultiPut, once armed, announces
// that it started and waits until the test lets it go, so a test can hold a
// write-back (CleanAhead's, an Insert's) in flight and act meanwhile.
//
// Thread safety: every method may be called from any thread. Ownership: as
// MemoryRowStore.
#pragma once

#include "base/mutex.h"
#include "tests/storage/ssd/memory_row_store.h"

namespace strata::storage::testing {

class GatedRowStore : public MemoryRowStore {
 public:
  using MemoryRowStore::MemoryRowStore;
  void Arm() {
    base::MutexLock lock(&gate_mu_);
    armed_ = true;
  }
  void WaitUntilPutStarted() {
    base::MutexLock lock(&gate_mu_);
    while (!started_) gate_cv_.Wait(&gate_mu_);
  }
  void Release() {
    base::MutexLock lock(&gate_mu_);
    released_ = true;
    gate_cv_.SignalAll();
  }
  bool put_finished() const {
    base::MutexLock lock(&gate_mu_);
    return finished_;
  }
  Status MultiPut(TableId table, std::span<const Key> keys,
                  std::span<const std::byte> rows) override {
    {
      base::MutexLock lock(&gate_mu_);
      if (armed_) {
        started_ = true;
        gate_cv_.SignalAll();
        while (!released_) gate_cv_.Wait(&gate_mu_);
      }
    }
    Status s = MemoryRowStore::MultiPut(table, keys, rows);
    base::MutexLock lock(&gate_mu_);
    if (armed_) finished_ = true;
    return s;
  }

 private:
  mutable base::Mutex gate_mu_;
  base::CondVar gate_cv_;  // with gate_mu_: started_ or released_ set
  bool armed_ GUARDED_BY(gate_mu_) = false;
  bool started_ GUARDED_BY(gate_mu_) = false;
  bool released_ GUARDED_BY(gate_mu_) = false;
  bool finished_ GUARDED_BY(gate_mu_) = false;
};

}  // namespace strata::storage::testing
