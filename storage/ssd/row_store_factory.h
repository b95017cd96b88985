// OpenRowStore: the one way the engine creates a tier-T2 row store.
//
// Opens `options.dir` with either backend. A missing directory is created and
// starts empty (its first checkpoint is written at once, so reopening an
// unused store gives an empty store). An existing directory recovers its last
// checkpoint exactly; the tables passed must equal the stored ones (same ids,
// names and row sizes, any order), otherwise InvalidArgument names the first
// table that differs and nothing on disk is changed.
//
// Thread safety: OpenRowStore may be called from any thread; two stores must
// not share a directory. Ownership: the caller owns the returned store and an
// optional `env`, which must outlive the store.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/env.h"
#include "storage/ssd/row_store.h"
#include "strata/options.h"
#include "strata/status.h"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace strata::storage {

// Points of the native store's log merges a test hook sees.
enum class LogMergePoint : uint8_t {
  kMergeStart,    // a merge of a frozen log begins (before any I/O)
  kMergeRound,    // a round of leaves was switched
  kBackpressure,  // a put found both logs busy and waits for the merge
};

// Points of format 2's cleaning a test hook sees.
enum class CleanPoint : uint8_t {
  kVictimRead,     // a step read its victim segment (no table lock held)
  kCopiesWritten,  // the victim's live records were written to the cleaner head
  kMergeWritten,   // key ranges: a merge wrote its range's new base (no table lock held)
  kMergeStart,     // key ranges: a merge picked its range and sealed its head, read nothing yet
  kStepEnd,        // a step ended (an error it met is already pending)
  kStall,          // a put found its table over the stall bound and waits
};

struct RowStoreOptions {
  SsdBackend backend = SsdBackend::kNative;
  std::string dir;         // created when missing; existing -> recover last checkpoint
  io::Env* env = nullptr;  // native backend file access; nullptr: io::Env::Default()

  // Native backend.
  // On-disk format of a new directory (docs/ssd-format.md): 2, an
  // append-only log of segments (the default; with ssd_index kRanges, key
  // ranges merged in the background); 1, leaf pages with the write log
  // below. An existing directory opens in the format it was written in,
  // whatever this says.
  uint32_t ssd_format_version = 2;
  // Format 2: bytes of a log segment, a power of two in [64 KiB, 64 MiB]
  // (raised for a table until a segment holds 8 records). The unit of
  // cleaning: larger segments make each cleaning step longer.
  uint64_t ssd_segment_bytes = 8ull << 20;
  // Format 2: the DRAM index, kCompact (7 bytes per key plus slack; a put of
  // a stored key reads its record once) or kExact (11 bytes per key plus
  // slack; puts read nothing). Chosen at every open (the index is rebuilt
  // from the log; nothing on disk depends on it). Format 1 ignores it.
  // kRanges: a new table is cut into 2^ssd_range_bits key ranges, each with
  // key-ordered base segments and its own log head, folded together by
  // background merges (docs/ssd-format.md, "Key ranges"); a table keeps the
  // layout it was created with, whatever this says at later opens.
  SsdIndex ssd_index = SsdIndex::kRanges;
  // kRanges: a new table's key ranges, 2^this (at most kRangeBitsMax). More
  // ranges make each merge shorter but hold more partly filled segments
  // (about 1.5 segments per range).
  uint32_t ssd_range_bits = 6;
  // kRanges: a merge runs while a table's log segments exceed this fraction
  // of its live row bytes (puts wait above it plus gc_space_amp_stall_slack);
  // in (0, 8]. Larger: fewer merges (less write amplification), more space.
  double ssd_merge_log_fraction = 0.35;
  // I/O threads (io::IoThreads) issuing the page reads and writes. 0: one
  // per entry of io_cores, else one (one core per SSD). More threads overlap
  // more system-call work and take more cores from the trainer.
  uint32_t io_threads = 0;
  std::vector<int> io_cores;  // cores the I/O threads are bound to (empty: unbound)
  // O_DIRECT on the data files: bypasses the page cache (T1 is the cache).
  // Falls back to buffered I/O where the file system refuses it (tmpfs).
  bool direct_io = true;
  // Garbage collection runs at Checkpoint() for a table whose file bytes
  // exceed this multiple of its live row bytes: lower keeps the files
  // smaller, at the cost of rewriting tables more often. Format 2: the
  // cleaner's target: it cleans while a table's segments exceed it.
  double gc_space_amp_trigger = 1.5;
  // Format 2: cleaning runs on a background thread of the store (true), or
  // in bounded steps inside MultiPut/Delete (false: every I/O on the caller's
  // thread in a fixed order, for tests that count or fail it).
  bool ssd_background_cleaning = true;
  // Format 2, background cleaning: a put or delete of a table whose segments
  // exceed (gc_space_amp_trigger + this) x its live row bytes first waits
  // for the cleaner to reclaim the room of twice its batch (at most that:
  // one batch's cleaning). Larger lets space amplification rise further
  // before puts wait; smaller makes puts wait sooner when the cleaner falls
  // behind.
  double gc_space_amp_stall_slack = 0.1;
  // Format 2: a failed cleaning step or merge is retried after this back-off,
  // doubled per failure in a row (up to 64 times it); after 4 failures in a
  // row puts past the stall bound are refused with the error until a step
  // succeeds (docs/ssd-format.md, "Merge and cleaning errors"). 0: retried
  // at once (tests).
  uint64_t merge_retry_backoff_us = 10000;
  // Tests: called at points of format 2's cleaning (CleanPoint) on the
  // thread there, which holds no table lock (kVictimRead and kCopiesWritten
  // of a cleaning step hold the cleaning lock, so a Checkpoint waits; a
  // merge's points do not hold up a Checkpoint). Empty: none.
  std::function<void(CleanPoint)> clean_hook;
  // Write log: puts append to a per-table log in large sequential writes.
  // Each table has two logs and one DRAM index over both, of this fraction
  // of the table's rows: when the active log is full it is frozen and merged
  // into the leaves (in key order) by a background thread while puts go on
  // into the other, which grows into the index room each merge round frees;
  // a put waits only while the index is full (for the merge's next round).
  // Checkpoints merge both first. Larger fractions rewrite fewer leaves per
  // row but take more DRAM for the index (about 15 bytes per entry: 15 x
  // this fraction bytes per key) and more log space. 0: puts rewrite their
  // leaves directly (no log, no background thread).
  double write_log_fraction = 0.25;
  // Entries (rows put or deleted) the log index holds at least, whatever the
  // table's size: small tables merge every write_log_entries_min writes.
  uint64_t write_log_entries_min = 4096;
  // Row bytes a merge holds in DRAM at most: it reads the frozen log
  // sequentially and keeps the rows of one range of keys; a log holding more
  // is read once per range (ceil(log rows x row bytes / this) passes).
  uint64_t write_log_merge_bytes = 256ull << 20;
  // Tests: called at points of the write logs' merges (LogMergePoint) on the
  // thread there, which holds no lock of the store but the table's merge
  // lock (none for kBackpressure). Empty: none.
  std::function<void(LogMergePoint)> log_merge_hook;

  // RocksDB backend.
  // Block cache: bigger caches serve more gets from DRAM, duplicating T1.
  uint64_t rocksdb_block_cache_bytes = 256ull << 20;
  // Bloom filter bits per key: 10 gives ~1% false positives for missing keys;
  // 0 disables filters (less memory, more reads for missing keys).
  int rocksdb_bloom_bits_per_key = 10;
  // Memtable size per table: bigger batches writes into fewer, larger L0
  // files at the cost of DRAM.
  uint64_t rocksdb_write_buffer_bytes = 64ull << 20;
  // Background flush and compaction threads.
  int rocksdb_background_threads = 2;
  // RocksDB's Env (tests inject I/O faults through a rocksdb::FileSystem
  // wrapper); nullptr: rocksdb::Env::Default(). Not owned; outlives the store.
  rocksdb::Env* rocksdb_env = nullptr;
};

// REQUIRES: tables non-empty, ids and names unique, row_bytes in
// [1, kRowBytesMax]; otherwise InvalidArgument.
[[nodiscard]] Result<std::unique_ptr<RowStore>> OpenRowStore(const RowStoreOptions& options,
                                                             const std::vector<TableSpec>& tables);

// Checks `tables` against the REQUIRES of OpenRowStore.
[[nodiscard]] Status ValidateTableSpecs(const std::vector<TableSpec>& tables);

// InvalidArgument naming the first table that differs between the stored and
// requested specs (compared by id), or OK when they are equal as sets.
[[nodiscard]] Status CompareTableSpecs(const std::vector<TableSpec>& stored,
                                       const std::vector<TableSpec>& requested,
                                       const std::string& dir);

}  // namespace strata::storage
