// NativeRowStore: the RowStore on our own page format (ssd_format.h,
// docs/ssd-format.md) through io::Env, O_DIRECT where the file system allows.
//
// Each table is one data file of leaf pages ordered by MixKey(key); a DRAM
// PageDirectory maps ranges of mixed keys to pages (16 bytes per leaf, about
// 2-3 bytes per key for 512-byte rows, at most 8). A lookup is one page read.
// A write reads the touched leaves, merges the batch in, and writes the new
// leaves to free pages (copy-on-write, splitting leaves that overflow), then
// switches the directory; pages the durable MANIFEST references are never
// overwritten, so Open always finds the last checkpoint intact. Checkpoint
// syncs the data files, garbage-collects tables whose space amplification
// passed options.gc_space_amp_trigger (rewriting them packed into a new file
// with large sequential writes), and switches the MANIFEST atomically.
//
// Thread safety: all methods are thread-safe. Per table, readers share a lock
// and writers hold it exclusively; Checkpoint holds every table's lock.
// Ownership: owns its files; the Env is borrowed and must outlive the store.
#pragma once

#include <memory>
#include <vector>

#include "storage/ssd/row_store.h"
#include "storage/ssd/row_store_factory.h"

namespace strata::storage {

[[nodiscard]] Result<std::unique_ptr<RowStore>> OpenNativeRowStore(
    const RowStoreOptions& options, const std::vector<TableSpec>& tables);

}  // namespace strata::storage
