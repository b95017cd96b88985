// RocksDbRowStore: the RowStore on RocksDB (the backend FBGEMM's SSD
// embeddings and several parameter servers use; also our baseline).
//
// Layout under dir/: `live/` is the working database (one column family per
// table, named "t<id>", plus "strata_meta" holding the table specs and the
// checkpoint meta); `ckpt-<n>/` is the last checkpoint, made by
// rocksdb::Checkpoint after flushing every column family; `CHECKPOINT` names
// it and is replaced atomically (write, sync, rename, fsync dir). Writes skip
// the WAL: only checkpoints are durable, and Open rebuilds `live/` from the
// checkpoint (hard links of its SST files), so reopening gives exactly the
// last checkpoint whatever happened after it. A checkpoint directory is
// deleted only behind a durable pointer naming another; a malformed or
// missing pointer beside checkpoint data is refused (Corruption), never taken
// for a new store (docs/ssd-format.md, "RocksDB open").
//
// Keys are 8 bytes big endian, values the fixed-size row. Settings favour
// point lookups: bloom filters, hash index inside data blocks, direct reads.
//
// Thread safety: all methods are thread-safe; Checkpoint excludes writers.
// Ownership: owns the database.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "storage/ssd/row_store.h"
#include "storage/ssd/row_store_factory.h"

namespace strata::storage {

[[nodiscard]] Result<std::unique_ptr<RowStore>> OpenRocksDbRowStore(
    const RowStoreOptions& options, const std::vector<TableSpec>& tables);

}  // namespace strata::storage
