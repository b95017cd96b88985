// Cluster: a Store sharded across processes (ranks) over MPI or NCCL. One Cluster per
// rank, each over a Store shard of its own in DIR/rank-<r> (its T0, its T1 in
// the rank's memory, its T2 in that directory). Every row has exactly one
// owner rank, fixed by a hash of (table, key) (ClusterOwner below; the
// function is named in the cluster manifest, docs/cluster.md), and lives only
// in its owner's shard.
//
// The calls are the Store's, with its contracts, and most are collective:
//   RegisterWorker, Pull, Push, AdvanceClock, DrainIntents, Checkpoint,
//   AgreeOn, SummedStats, Close
// must be called by every rank of the communicator, in the same order, with
// the same worker and table (keys and their counts differ per rank). A rank
// that calls Pull while another calls Push deadlocks, as in MPI. Intent is
// local: it queues the keys per owner and the next AdvanceClock or
// DrainIntents delivers them (one exchange, not one per Intent call), so the
// owners' planners prefetch ahead of the batch as a Store's does.
//
// Worker w names the same worker on every rank: RegisterWorker registers one
// in every shard, and an owner serves rank r's worker w with its shard's
// worker w, whose clock advances with the collective AdvanceClock.
//
// Failure: bad input (an unknown table or worker, a null buffer, ranks
// disagreeing on the table, a mismatched table list at Open) fails on every
// rank with the same code and a message naming the rank at fault, never a
// hang; so does an error in one owner's shard. A rank that dies or hangs
// makes the others' next collective return Unavailable after
// ClusterOptions::collective_timeout_ms (Open MPI may also end the job when a
// rank exits).
//
// Thread safety: Intent, CurrentClock, Stats, FindTable and Tables may be
// called from any thread at any time; the collective calls are serialized
// per rank (a mutex), and their order must match across ranks, which in
// practice means one thread drives them. Open with an MPI_Comm needs MPI
// initialized (MPI_Init or MPI_Init_thread), finalized after the Cluster is
// destroyed.
// Ownership: the caller owns keys, out and grads and the communicator, which
// Open duplicates (the MPI form: MPI_Comm_dup; the NCCL form: ncclCommSplit).
//
// Two forms (docs/cluster.md, "The NCCL form"):
//   MPI form (ClusterTransport::kMpi, Open with an MPI_Comm): everything over
//     MPI, out and grads in host memory; the shards keep T0 in host memory.
//   NCCL form (Open with the pipeline's ncclComm_t, or ClusterTransport::kNccl
//     with an MPI_Comm, over which rank 0's ncclUniqueId reaches every rank):
//     out and grads in GPU memory, on the stream passed to Pull and Push
//     (their keys in host or GPU memory, Intent's in host memory); keys,
//     rows and gradients travel by grouped ncclSend/ncclRecv, the control
//     plane by NCCL collectives; the shards keep T0 on the GPU
//     (store.use_gpu). Open with an ncclComm_t makes no MPI call, so MPI
//     need not be initialized. Each rank's GPU is the current device of the
//     thread that calls Open (cudaSetDevice first); the collective calls
//     make it current again. Builds without NCCL refuse it.
#pragma once

// The C bindings only: Open MPI's C++ bindings are deprecated and warn.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "strata/cluster_owner.h"
#include "strata/options.h"
#include "strata/stats.h"
#include "strata/status.h"
#include "strata/store.h"
#include "strata/types.h"

// NCCL's communicator, as nccl.h declares it (the NCCL form's Open takes one;
// this header needs no NCCL).
typedef struct ncclComm* ncclComm_t;

namespace strata {

// What carries the cluster's collectives (docs/cluster.md, "The NCCL form").
enum class ClusterTransport : uint8_t {
  kMpi,   // MPI, host buffers
  kNccl,  // NCCL, device buffers; the communicator made over the MPI_Comm at Open
};

// How Pull and Push move keys, rows and gradients between ranks
// (docs/cluster.md, "Routes").
enum class ClusterExchange : uint8_t {
  kFlat,      // one all-to-all, every message straight from sender to receiver
  kTwoPhase,  // along the topology's routes: through NVLink middlemen and the NIC GPU
};

struct ClusterOptions {
  // The options of every shard; store.dir is the cluster's directory, each
  // rank's shard lives in store.dir/rank-<r>. Capacities are per rank.
  // store.use_gpu: the NCCL form keeps T0 on the GPU when true (and a GPU
  // is visible); the MPI form ignores it and keeps T0 in host memory.
  StoreOptions store;
  // The MPI form, or the NCCL form made over the MPI_Comm that Open gets.
  // Open with an ncclComm_t is the NCCL form whatever this says.
  ClusterTransport transport = ClusterTransport::kMpi;
  // The longest a rank waits in one collective step for the other ranks,
  // then the call returns Unavailable and the cluster is unusable (an MPI
  // collective cannot be cancelled). It bounds how long a dead or hung rank
  // stalls the others; it must exceed the longest skew between ranks (a
  // batch's compute, a checkpoint). 0: wait forever.
  uint64_t collective_timeout_ms = 600'000;
  // Each shard keeps a copy of its previous checkpoint while a cluster
  // checkpoint is in flight (DIR/rank-<r>.prev), so that Open rolls back a
  // checkpoint a crash interrupted on every rank. Costs a copy of the shard's
  // files per Checkpoint; false: no copy, and Open refuses (names the rank)
  // a directory whose shards a crash left at different generations.
  bool keep_previous_checkpoint = true;
  // kTwoPhase forwards through other ranks' buffers in as many all-to-all
  // stages as the longest route has hops: no message crosses PCIe where an
  // NVLink path exists, and one network exchange per node pair, at the cost
  // of more, smaller collectives. The rows are the same either way.
  ClusterExchange exchange = ClusterExchange::kFlat;
  // The node topology: a fixture ("seed8", "nvswitch8", "pcie8") or the path
  // of a topology file (format in docs/cluster.md). Rank r is GPU r % G of
  // node r / G, G the topology's GPU count; the world size must be a
  // multiple of G. Required by kTwoPhase; "" with kFlat.
  std::string topology;
  // A diagnostic for benchmarks (strata_cluster_bench): a barrier before
  // and after each of Pull's and Push's all-to-alls (headers, keys, rows,
  // gradients), so that ClusterExchangeStats::exchange_us times the
  // transfers alone, from after the first barrier: not the wait for ranks
  // still routing or serving their shard, nor (ranks outnumbering cores)
  // the core a rank done early takes for its shard while others still
  // exchange. The barriers' time goes to align_wait_us. Two collectives
  // more per all-to-all: not for training. Every rank passes the same value.
  bool align_exchanges = false;
};

// Counters of the exchange on one rank (Stats); summed over ranks by
// Cluster::SummedStats.
struct ClusterExchangeStats {
  uint64_t pull_calls = 0;
  uint64_t push_calls = 0;
  uint64_t keys_sent = 0;       // distinct keys this rank sent to other ranks
  uint64_t keys_served = 0;     // keys other ranks asked this rank's shard for
  uint64_t bytes_sent = 0;      // bytes sent to other ranks (keys, rows, gradients, intents)
  uint64_t bytes_received = 0;  // bytes received from other ranks
  uint64_t intents_sent = 0;    // intent keys delivered to other ranks
  // Time in the all-to-alls of Pull and Push (headers, keys, rows,
  // gradients; a two-phase exchange's stages count as one), and how many.
  uint64_t exchange_us = 0;
  uint64_t exchange_calls = 0;
  // ClusterOptions::align_exchanges: time in the barriers before them.
  uint64_t align_wait_us = 0;
  // kTwoPhase: bytes this rank forwarded for other ranks (a middleman's or
  // a NIC GPU's share; not in bytes_sent).
  uint64_t bytes_forwarded = 0;
};

struct ClusterStats {
  StoreStats store;  // the shard's Store::Stats
  ClusterExchangeStats exchange;
};

class Cluster {
 public:
  virtual ~Cluster() = default;

  // Collective. Opens rank r's shard in options.store.dir/rank-<r>, after
  // checking that every rank passed the same tables (InvalidArgument on every
  // rank naming the first rank and table that differ from rank 0's). When the
  // directory holds a cluster manifest, its world size must be the
  // communicator's (InvalidArgument naming both) and every shard must be at
  // the manifest's generation: a shard that an interrupted Checkpoint left
  // past it is rolled back to its kept copy; without one, FailedPrecondition
  // naming the rank.
  // options.transport picks the MPI or the NCCL form.
  static Result<std::unique_ptr<Cluster>> Open(const ClusterOptions& options,
                                               const std::vector<TableOptions>& tables,
                                               MPI_Comm comm);
  // The NCCL form over the pipeline's communicator: collective over `comm`
  // (ncclCommSplit), no MPI call. FailedPrecondition in a build without NCCL
  // or without a GPU; InvalidArgument with ClusterExchange::kTwoPhase (NCCL
  // routes over NVLink and the NICs itself).
  static Result<std::unique_ptr<Cluster>> Open(const ClusterOptions& options,
                                               const std::vector<TableOptions>& tables,
                                               ncclComm_t comm);

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Collective: a new worker on every shard, the same id on every rank.
  virtual Result<WorkerId> RegisterWorker() = 0;
  // Local: queues `keys` for their owners; delivered by the next
  // AdvanceClock or DrainIntents. REQUIRES: start < end.
  [[nodiscard]] virtual Status Intent(WorkerId worker, TableId table, std::span<const Key> keys,
                                      Clock start, Clock end) = 0;
  // Collective: delivers the queued intents of every worker, then advances
  // `worker`'s clock on every shard.
  [[nodiscard]] virtual Status AdvanceClock(WorkerId worker) = 0;
  virtual Result<Clock> CurrentClock(WorkerId worker) const = 0;

  // Collective. Embeddings of this rank's `keys` of `table` into `out`
  // (keys.size() * dim floats, the caller's order), fetched from their owners.
  // `stream`: the NCCL form's cudaStream_t (nullptr: the default stream),
  // on which the call runs; it returns once the rows have arrived, with
  // their scatter into `out` queued on `stream`. The MPI form ignores it.
  [[nodiscard]] virtual Status Pull(WorkerId worker, TableId table, std::span<const Key> keys,
                                    float* out, void* stream = nullptr) = 0;
  // Collective. Gradients (keys.size() * dim floats): duplicates summed here,
  // sent to the owners, whose Push sums what every rank sent for a key and
  // applies the optimizer once per key.
  // `stream` as in Pull: the gradients are read in its order.
  [[nodiscard]] virtual Status Push(WorkerId worker, TableId table, std::span<const Key> keys,
                                    const float* grads, void* stream = nullptr) = 0;

  // Collective: delivers the queued intents and waits for every shard's
  // planner to take them in (Store::DrainIntents).
  [[nodiscard]] virtual Status DrainIntents() = 0;

  // Collective: every shard checkpoints, then rank 0 writes the cluster
  // manifest (world size, ownership function, per-rank generation, tables)
  // last, atomically. A failure on any rank fails the call on every rank and
  // leaves the manifest at the previous generation; a crash of any rank at
  // any point leaves a directory that Open restores at the previous
  // generation or the new one, the same on every rank
  // (keep_previous_checkpoint).
  [[nodiscard]] virtual Status Checkpoint() = 0;

  // Collective: OK on every rank when `local` is OK on every rank; otherwise,
  // on every rank, the lowest failing rank's code and message ("rank <r>:
  // ..."). For a program's own checks between collective calls (a rank that
  // returned alone would leave the others waiting in the next collective).
  [[nodiscard]] virtual Status AgreeOn(const Status& local) = 0;

  // Local: this rank's counters.
  virtual ClusterStats Stats() const = 0;
  // Collective: every rank's counters summed (the same on every rank).
  virtual Result<ClusterStats> SummedStats() = 0;

  // This rank's shard, for export and verification (ScanTable): it holds
  // the rows this rank owns. Not for the training loop's data path.
  virtual Store& shard() = 0;
  virtual const std::vector<TableOptions>& Tables() const = 0;

  // Collective: closes the shard and frees the duplicated communicator;
  // later calls return FailedPrecondition.
  [[nodiscard]] virtual Status Close() = 0;
};

}  // namespace strata
