// RowStore: tier T2, the home of every row that lives nowhere above it.
//
// A store holds several tables; within a table every row has the same size
// (`row_bytes`: embedding plus optimizer state, opaque bytes to the store).
// Every 64-bit key is valid, 0 and 2^64-1 included.
//
// Durability: MultiPut/Delete are visible to later reads at once; they are
// durable after Sync(). Checkpoint() makes everything durable and switches
// the manifest atomically; Open() on the directory recovers the last
// checkpoint exactly (writes after it are discarded).
//
// Thread safety: all methods may be called concurrently from any thread.
// Ownership: the caller owns the buffers passed in; the store copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "strata/status.h"
#include "strata/types.h"

namespace strata::storage {

struct TableSpec {
  TableId id = 0;
  std::string name;
  uint32_t row_bytes = 0;  // fixed size of every row of the table
  // Rows the table is expected to hold (0: unknown): sizes a new table's
  // key ranges (SsdRangeBitsFor). Not stored, not compared at open.
  uint64_t rows_hint = 0;
};

struct RowStoreStats {
  uint64_t rows_read = 0;
  uint64_t rows_written = 0;
  uint64_t bytes_read = 0;          // from the device
  uint64_t bytes_written = 0;       // to the device
  uint64_t user_bytes_written = 0;  // row bytes handed to MultiPut
  uint64_t live_rows = 0;
  uint64_t live_bytes = 0;   // live rows x row bytes
  uint64_t file_bytes = 0;   // bytes the store occupies on disk
  uint64_t index_bytes = 0;  // DRAM held by the in-memory index
  // Obsolete files, pages or checkpoints a checkpoint or open failed to
  // delete or truncate after a durable switch (the checkpoint stands; the
  // cleanup is retried later).
  uint64_t cleanup_errors = 0;
  // Native format 2: merges and cleaning steps completed, and those that
  // failed (each retried after a back-off; nothing durable changed).
  uint64_t merges = 0;
  uint64_t merge_failures = 0;
  double write_amp() const {
    return user_bytes_written ? double(bytes_written) / double(user_bytes_written) : 0.0;
  }
  double space_amp() const { return live_bytes ? double(file_bytes) / double(live_bytes) : 0.0; }
};

class RowStore {
 public:
  virtual ~RowStore() = default;

  // Reads rows of `keys` into `rows` (keys.size() * row_bytes bytes). For each
  // key, found[i] is set to 1 when present, 0 when missing (row bytes left
  // untouched). An I/O or checksum error fails the whole call.
  [[nodiscard]] virtual Status MultiGet(TableId table, std::span<const Key> keys,
                                        std::span<std::byte> rows, std::span<uint8_t> found) = 0;
  // Inserts or overwrites rows (keys.size() * row_bytes bytes). A failed call
  // may have applied a prefix of the batch; each row is whole or absent.
  [[nodiscard]] virtual Status MultiPut(TableId table, std::span<const Key> keys,
                                        std::span<const std::byte> rows) = 0;
  [[nodiscard]] virtual Status Delete(TableId table, std::span<const Key> keys) = 0;
  // Calls `fn(key, row)` for every live row of `table` (order unspecified).
  // Stops early and returns the callback's first non-OK Status.
  [[nodiscard]] virtual Status Scan(
      TableId table, const std::function<Status(Key, std::span<const std::byte>)>& fn) = 0;
  [[nodiscard]] virtual Status Sync() = 0;
  // Makes everything durable and switches the manifest; `meta` is opaque
  // bytes saved with it (the engine's clocks), returned by CheckpointMeta().
  [[nodiscard]] virtual Status Checkpoint(std::span<const std::byte> meta) = 0;
  virtual std::vector<std::byte> CheckpointMeta() const = 0;
  virtual RowStoreStats Stats() const = 0;
  virtual const std::vector<TableSpec>& Tables() const = 0;
};

}  // namespace strata::storage
