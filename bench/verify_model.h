// VerifyModel: what every row of a replay must hold, for `replay --verify`.
//
// The replay uses SGD with learning rate 1 and gradients chosen so that the
// expected value of a row is exact whatever order the workers' pushes land in:
// every push of key k adds, per occurrence, g[d] = sign(k, d) * 2^-e(k) to the
// gradient, so after n occurrences have been applied
//     row[d] = init[d] - n * sign(k, d) * 2^-e(k)
// where init is the row's initial value (deterministic per table and key:
// taken from the first pull that no push can have reached, and every later
// such pull must match it bit for bit). e(k) is picked from the key's total
// occurrences in the trace so that |n * 2^-e(k)| <= 1 and float rounding
// stays far below one step: n is then recovered from each dimension and must
// be the same integer in all of them, at least the pushes this worker has
// completed and at most the pushes started by anyone.
//
// Thread safety: Build once; then Check*/Record* from any worker thread
// (counters are atomics; a worker's own counters are touched only by it).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "strata/status.h"
#include "strata/types.h"
#include "trace/key_index.h"

namespace strata::bench {

class VerifyModel {
 public:
  // Reads the trace to index its keys and count their occurrences.
  static Result<std::unique_ptr<VerifyModel>> Build(const std::string& trace_path, uint32_t dim,
                                                    uint32_t workers, uint64_t batches_max = 0);

  // Gradients of `keys` (one row of dim floats per occurrence) into grads.
  void Gradients(TableId table, std::span<const Key> keys, float* grads) const;

  // Checks the rows `out` pulled for `keys` by worker w in its batch `batch`.
  // `started_after` must hold, per occurrence, the push count read after the
  // Pull returned (ReadStarted). Corruption naming table, key and batch.
  // `recorded` (may be null) gets the positions in `keys` whose row this
  // pull recorded as the key's initial value.
  [[nodiscard]] Status CheckPull(uint32_t worker, uint64_t batch, TableId table,
                                 std::span<const Key> keys, const float* out,
                                 std::span<const uint32_t> started_after,
                                 std::vector<uint32_t>* recorded = nullptr);
  // The initial value of `key` another process's model recorded (a cluster
  // replay: only the ranks that pull a key before any push see it): taken
  // when this model has none, else it must be equal bit for bit (Corruption).
  [[nodiscard]] Status ShareInit(TableId table, Key key, std::span<const float> row);
  void ReadStarted(TableId table, std::span<const Key> keys, std::vector<uint32_t>* started) const;

  // Around a Push of `keys` by worker w.
  void BeforePush(TableId table, std::span<const Key> keys);
  void AfterPush(uint32_t worker, TableId table, std::span<const Key> keys);

  // Final state of one row (every push applied). Corruption on mismatch or a
  // row the trace never touched; counts the row as seen.
  [[nodiscard]] Status CheckFinal(TableId table, Key key, std::span<const float> row);
  // Every key of `table` the trace touches (in first-touch order).
  std::vector<Key> Keys(TableId table) const;
  // Clears the seen marks of `table` (before a retried scan).
  void ForgetSeen(TableId table);
  // NotFound naming a key the trace touched that no scan returned.
  [[nodiscard]] Status CheckAllSeen() const;
  // The same for the keys `mine` selects (the rows one cluster rank owns).
  [[nodiscard]] Status CheckAllSeen(const std::function<bool(TableId, Key)>& mine) const;

  uint64_t checked_rows() const { return checked_rows_.load(std::memory_order_relaxed); }

 private:
  VerifyModel(uint32_t dim, uint32_t workers) : dim_(dim), workers_(workers) {}
  uint32_t Id(TableId table, Key key) const;
  float Sign(TableId table, Key key, uint32_t d) const;
  // Occurrences recovered from `row`, or -1 when the dimensions disagree.
  int64_t Recover(uint32_t id, const float* row) const;
  Status Mismatch(const char* what, uint32_t worker, uint64_t batch, TableId table, Key key,
                  const float* row, int64_t lo, int64_t hi) const;

  const uint32_t dim_;
  const uint32_t workers_;
  trace::KeyIndex index_;
  std::vector<std::string> table_names_;  // from the trace header
  std::vector<uint32_t> total_;           // occurrences in the trace, by id
  std::vector<uint8_t> step_exponent_;    // e(k), by id
  std::unique_ptr<std::atomic<uint32_t>[]> started_;
  std::unique_ptr<std::atomic<uint8_t>[]> init_state_;  // 0 unknown, 1 being set, 2 set
  std::vector<float> init_;                             // dim floats per id
  std::vector<std::vector<uint32_t>> own_completed_;    // per worker, by id
  std::vector<uint8_t> seen_;                           // by id: returned by the final scan
  std::atomic<uint64_t> checked_rows_{0};
};

}  // namespace strata::bench
