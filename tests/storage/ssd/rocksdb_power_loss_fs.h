// RocksPowerLossFs: a power loss under the RocksDB backend, for tests. The
// RocksDB twin of io::FaultEnv's crash simulation (DropUnsyncedWrites).
//
// It wraps rocksdb::FileSystem::Default() in a rocksdb::FileSystem that counts
// every call (opens and creates, reads, appends, flushes, syncs, truncates,
// renames, links, deletes, directory creates and fsyncs, listings, ...) and
// remembers what a power loss would leave:
// - every file written through it keeps only its content at its last
//   successful Sync/Fsync (appends after it are lost; a file that existed
//   before it was opened counts as synced up to its size then);
// - a file or directory created, a hard link made or a rename done vanishes
//   or moves back to its old name (restoring the file the rename replaced,
//   as it was at its last sync) unless the parent directory of the new name
//   was fsynced afterwards (FSDirectory::Fsync or FsyncWithDirOptions);
// - deletions, and truncation (O_TRUNC opens, Truncate), count as durable at
//   once, as io::FaultEnv makes them (and so do the creates and renames that
//   made the deleted name);
// - in-place overwrites below the synced size (RandomRWFile, direct I/O's
//   rewrite of its last page) are kept: RocksDB rewrites the same bytes there.
// CutPowerAtOp(n) makes the nth call counted and every later one fail with an
// IOError ("power cut"), so a test can stop RocksDB at any point of a
// checkpoint. Two calls are counted but never refused, as nothing they do
// reaches the disk: UnlockFile (a lock is process state, which the power loss
// clears too; a failed unlock would keep the DB locked in this process) and
// FileExists (RocksDB 7.8's WalManager::GetSortedWalFiles asserts on the
// wrong status when it fails, aborting the process). While the power is cut,
// RocksDB's back-off sleeps (a second after a failed background flush) return
// at once. DropUnsyncedData() then turns the files into what the power loss
// leaves and lifts the cut. Files and directories never written, created or
// renamed through the wrapper are untouched. A replaced file's synced content
// is kept in memory: meant for tests with small replaced files (CURRENT,
// CHECKPOINT).
//
// Typical use: CutPowerAtOp(ops_seen() + k); run the operation;
// CutPowerAtOp(ops_seen()) (cut now, if it finished first); close the DB
// (every call fails, so nothing more reaches the disk); DropUnsyncedData();
// reopen.
//
// Thread safety: all methods are thread-safe, and so are the FileSystem and
// its files. Ownership: owns the Env and the FileSystem behind it.
#pragma once

#include <cstdint>
#include <memory>

#include "strata/status.h"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace strata::storage::testing {

class PowerLossFileSystem;  // in rocksdb_power_loss_fs.cc

// REQUIRES: outlives every RocksDB instance opened on env().
class RocksPowerLossFs {
 public:
  RocksPowerLossFs();  // over rocksdb::FileSystem::Default()
  ~RocksPowerLossFs();
  RocksPowerLossFs(const RocksPowerLossFs&) = delete;
  RocksPowerLossFs& operator=(const RocksPowerLossFs&) = delete;

  // Pass as RowStoreOptions::rocksdb_env.
  rocksdb::Env* env();

  // From the nth call counted since construction on (1-based, see ops_seen),
  // every call fails with an IOError ("power cut"); n <= ops_seen(): every
  // call from now on. 0: never.
  void CutPowerAtOp(uint64_t n);
  // Calls counted so far (those refused by the cut included).
  uint64_t ops_seen() const;

  // The power loss (see the header comment), then the cut is lifted. An
  // IOError names the first path that could not be restored.
  // REQUIRES: no file of this wrapper is written concurrently (close the DB
  // first, with the power cut); files may stay open.
  [[nodiscard]] Status DropUnsyncedData();

 private:
  std::shared_ptr<PowerLossFileSystem> fs_;
  std::unique_ptr<rocksdb::Env> env_;
};

}  // namespace strata::storage::testing
