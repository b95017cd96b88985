// The cluster replay behind `mpirun -np R strata replay TRACE --cluster`:
// the batches of a trace driven through a strata::Cluster of R ranks
// (docs/cluster.md, "Replay under mpirun").
//
// Batch b of the trace goes to rank b % R. The cluster's calls are
// collective, so the ranks move in steps: step s holds batches s*R ..
// s*R + R - 1, one per rank (a rank past the trace's end takes part with no
// keys), all of one worker, w = s % workers, at its clock s / workers. Per
// step every rank pulls every table (its batch's keys, maybe none), computes
// gradients, pushes every table and advances w's clock. One thread per rank
// drives the collective calls; the workers are the cluster's, whose clocks
// the steps advance in turn. With intents, a rank signals its own batch of
// step s + lookahead * workers (worker w, clock c + lookahead) at step s: an
// intent reaches its owner at the end of the step (Cluster::AdvanceClock)
// and its window opens `lookahead` clocks of w later.
//
// With `verify`, every rank keeps the model of all pushes of every rank
// (verify_model.h): it reads every batch of a step and applies all of them,
// so its model knows exactly which pushes a pull must see. A key's initial
// value is recorded by the ranks that pull it before any push and shared
// with every rank at the end of the step (bit-for-bit equal where several
// recorded it). At the end each rank checks the rows its shard owns: a scan
// of the shard, or, with injected faults, collective pulls of those keys.
// A failure on one rank fails the run on every rank (Cluster::AgreeOn at
// every step), with the failing rank's message. The run ends with a cluster
// checkpoint, so the directory can be reopened, resharded or exported.
//
// Faults: a collective call that fails with IOError or ResourceExhausted
// fails the same way on every rank, so every rank retries it together.
//
// Thread safety: call from the thread that initialized MPI, on every rank
// of `comm`, with the same options.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "bench/replay_driver.h"
#include "strata/cluster.h"

namespace strata::bench {

// One rank's part of a cluster replay.
struct ClusterReplayRank {
  uint64_t batches = 0;      // trace batches this rank ran
  uint64_t pulls = 0;        // keys this rank pulled (its batches')
  uint64_t shard_pulls = 0;  // keys its shard served (Store::Stats().pulls)
  uint64_t stall_pulls = 0;  // of those, fetched synchronously
  uint64_t keys_sent = 0;    // ClusterExchangeStats: rows exchanged with other ranks
  uint64_t keys_served = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t intents_sent = 0;
  uint64_t exchange_us = 0;
  uint64_t ssd_row_reads = 0;
  uint64_t ssd_row_writes = 0;
  uint64_t t0_hits = 0;
  uint64_t t1_hits = 0;
  uint64_t verified_rows = 0;  // pulled rows checked against the model
  uint64_t scanned_rows = 0;   // rows of its shard checked at the end
  uint64_t retried_errors = 0;
  uint64_t elapsed_us = 0;  // its steps, from the first to the last

  // Every field, in one order (packing for MPI).
  template <typename Fn>
  void ForEach(Fn fn) {
    for (uint64_t* v :
         {&batches, &pulls, &shard_pulls, &stall_pulls, &keys_sent, &keys_served, &bytes_sent,
          &bytes_received, &intents_sent, &exchange_us, &ssd_row_reads, &ssd_row_writes, &t0_hits,
          &t1_hits, &verified_rows, &scanned_rows, &retried_errors, &elapsed_us}) {
      fn(v);
    }
  }
};

struct ClusterReplayReport {
  int rank = 0;
  int world_size = 1;
  uint64_t steps = 0;
  uint64_t batches_total = 0;
  std::vector<ClusterReplayRank> ranks;  // every rank's, in rank order
  ClusterReplayRank summed;              // their sum (elapsed_us: the longest)
};

// Runs the replay on this rank; options.dir is the cluster's directory (rank
// r's shard in dir/rank-<r>), which must be empty or missing. With
// options.export_path, rank 0 writes every rank's final rows there.
Result<ClusterReplayReport> RunClusterReplay(const ReplayOptions& options, MPI_Comm comm);

// Collective over the cluster's ranks (`comm` holds the same ranks): every
// rank scans its shard (a scan failing with IOError or ResourceExhausted is
// tried up to `attempts` times), checks that it owns every row it holds
// (Corruption naming the rank, table and key otherwise), and rank 0 writes
// all rows to `path` (row_export.h). *rows: the rows of this rank's shard.
[[nodiscard]] Status ExportClusterRows(Cluster& cluster, MPI_Comm comm, const std::string& path,
                                       uint32_t attempts, uint64_t* rows);

}  // namespace strata::bench
