// LogRowStore: the native RowStore in format version 2 (docs/ssd-format.md,
// "Native format, version 2"), an append-only log per table.
//
// Every row lives in a record of a table's log file, an array of segments:
// MultiPut and Delete append records (a tombstone for a delete) in large
// sequential, O_DIRECT, 4 KiB-aligned writes, and a TableIndex maps each
// key to its newest record, so a get is one device read in the common case:
// options.ssd_index chooses a CompactIndex (at most 8 bytes per key; a put of
// a stored key reads its record once) or an ExactIndex (about 11.7 bytes per
// key; puts read nothing). No written 4 KiB block is written again: the
// partly filled last block of each head segment stays in DRAM until an
// append fills it or a checkpoint writes it and seals the segment. A greedy
// cleaner copies the live records of the emptiest segments forward while a
// table's segments exceed options.gc_space_amp_trigger x its live row
// bytes: on a background thread of the store (the default), or in bounded
// steps inside MultiPut/Delete (ssd_background_cleaning off). Checkpoint
// fsyncs the log and switches a version-2 MANIFEST naming each segment and
// its extent; Open rebuilds the index from the named segments, so a crash
// at any point reopens the last checkpoint exactly.
//
// Thread safety: all methods are thread-safe. Per table one reader-writer
// lock: gets and Scan share it; writes and Checkpoint hold it exclusively;
// a cleaning step holds it only to pick its victim, to plan its copies and
// to switch entries, never across its I/O. A write waits for the cleaner
// only while its table is over gc_space_amp_trigger +
// gc_space_amp_stall_slack, and then for about one batch's cleaning.
// Checkpoint waits for the cleaner's step in flight and holds it off until
// the switch. A cleaner error is returned once by the next write or
// Checkpoint. Ownership: owns its files and the cleaner thread (joined by
// the destructor); the Env is borrowed and must outlive the store.
#pragma once

#include <memory>
#include <vector>

#include "storage/ssd/row_store.h"
#include "storage/ssd/row_store_factory.h"

namespace strata::storage {

[[nodiscard]] Result<std::unique_ptr<RowStore>> OpenLogRowStore(
    const RowStoreOptions& options, const std::vector<TableSpec>& tables);

}  // namespace strata::storage
