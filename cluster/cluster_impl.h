// ClusterImpl: the Cluster behind include/strata/cluster.h, over MPI.
//
// Files, one concern each (all define ClusterImpl members):
//   cluster_open.cc        Open: the communicator, the table check across
//                          ranks, the manifest and shard checks, the shard;
//                          RegisterWorker, Close
//   cluster_data.cc        Pull and Push: route, header all-to-all, keys
//                          (and gradients) to owners, rows back
//   cluster_exchange.cc    the exchange plan (flat or two-phase) and the
//                          all-to-all along its routes
//   cluster_intent.cc      Intent queues per owner, their delivery at
//                          AdvanceClock and DrainIntents
//   cluster_checkpoint.cc  Checkpoint: kept copies, shard records, shards,
//                          manifest; the roll-back at Open
//   shard_backup.h         a shard's kept previous checkpoint
//   cluster_stats.cc       Stats and SummedStats
//   key_router.h           distinct keys grouped by owner
//   mpi_comm.h             MPI calls as Status; AgreeOn
//   manifest.h             CLUSTER and CLUSTER_SHARD files
//
// Locking: collective_mu_ serializes the collective calls of one rank (and
// guards their scratch and the checkpoint generation); intent_mu_ (a leaf,
// taken inside collective_mu_ by the delivery, alone by Intent) guards the
// queued intents. Counters are atomics, read by Stats without a lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/mutex.h"
#include "cluster/key_router.h"
#include "cluster/mpi_comm.h"
#include "cluster/route_plan.h"
#include "io/env.h"
#include "strata/cluster.h"

namespace strata::cluster {

struct ExchangeCounters {
  std::atomic<uint64_t> pull_calls{0}, push_calls{0};
  std::atomic<uint64_t> keys_sent{0}, keys_served{0};
  std::atomic<uint64_t> bytes_sent{0}, bytes_received{0};
  std::atomic<uint64_t> intents_sent{0}, exchange_us{0};
  std::atomic<uint64_t> bytes_forwarded{0};
};

class ClusterImpl final : public Cluster {
 public:
  // `env`: the cluster's own files (manifest, shard records, the shards'
  // kept checkpoints; tests inject faults and crashes); the shards' Stores
  // use io::Env::Default(). Not owned; outlives the cluster.
  static Result<std::unique_ptr<Cluster>> Open(const ClusterOptions& options,
                                               const std::vector<TableOptions>& tables,
                                               MPI_Comm comm, io::Env* env);
  ~ClusterImpl() override;

  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->size(); }
  Result<WorkerId> RegisterWorker() override EXCLUDES(collective_mu_);
  Status Intent(WorkerId worker, TableId table, std::span<const Key> keys, Clock start,
                Clock end) override EXCLUDES(intent_mu_);
  Status AdvanceClock(WorkerId worker) override EXCLUDES(collective_mu_);
  Result<Clock> CurrentClock(WorkerId worker) const override;
  Status Pull(WorkerId worker, TableId table, std::span<const Key> keys, float* out) override
      EXCLUDES(collective_mu_);
  Status Push(WorkerId worker, TableId table, std::span<const Key> keys,
              const float* grads) override EXCLUDES(collective_mu_);
  Status DrainIntents() override EXCLUDES(collective_mu_);
  Status Checkpoint() override EXCLUDES(collective_mu_);
  Status AgreeOn(const Status& local) override EXCLUDES(collective_mu_);
  ClusterStats Stats() const override;
  Result<ClusterStats> SummedStats() override EXCLUDES(collective_mu_);
  Store& shard() override { return *shard_; }
  const std::vector<TableOptions>& Tables() const override { return tables_; }
  Status Close() override EXCLUDES(collective_mu_);

 private:
  // What every rank sends every other at the start of Pull and Push.
  struct Header {
    int32_t code;   // the sender's local check (StatusCode), 0: OK
    int32_t count;  // keys the sender sends this receiver
    uint32_t table;
    uint32_t worker;
  };
  // Intents queued for one owner.
  struct QueuedIntent {
    WorkerId worker;
    TableId table;
    Clock start;
    Clock end;
    uint64_t count;
  };
  struct OwnerQueue {
    std::vector<QueuedIntent> intents;
    std::vector<Key> keys;
  };

  ClusterImpl(const ClusterOptions& options, const std::vector<TableOptions>& tables,
              std::unique_ptr<MpiComm> comm, io::Env* env);

  // Open (cluster_open.cc).
  Status CheckTablesAcrossRanks() REQUIRES(collective_mu_);
  Status CheckManifest() REQUIRES(collective_mu_);
  // This rank's shard at the manifest's generation `want`: rolled back to its
  // kept copy when an interrupted checkpoint left it past `want` (Open).
  Status RecoverShard(uint64_t want) REQUIRES(collective_mu_);
  Status OpenShard() REQUIRES(collective_mu_);

  // Local checks of a call: InvalidArgument or FailedPrecondition.
  Status CheckOpen() const;
  Status CheckCall(WorkerId worker, TableId table, std::span<const Key> keys, const void* data,
                   const char* what) const;

  // The data path (cluster_data.cc). Exchanges headers and agrees on the
  // local checks; *recv_counts: keys each rank sends this one.
  Status ExchangeHeaders(const Status& local, WorkerId worker, TableId table, const char* what,
                         std::vector<int>* recv_counts) REQUIRES(collective_mu_);
  // Sends router_.grouped() to the owners into recv_keys_.
  Status SendKeys(std::span<const int> recv_counts) REQUIRES(collective_mu_);

  // The exchange plan (cluster_exchange.cc): builds plan_ from the options
  // and checks that every rank has the same.
  Status PlanExchange() REQUIRES(collective_mu_);
  // comm_->AllToAllv's contract, along plan_'s routes (straight when flat).
  Status Exchange(const void* send, std::span<const int> send_counts, void* recv,
                  std::span<const int> recv_counts, MPI_Datatype type) REQUIRES(collective_mu_);

  // Intent delivery (cluster_intent.cc).
  Status DeliverIntents() REQUIRES(collective_mu_) EXCLUDES(intent_mu_);

  // Checkpoint (cluster_checkpoint.cc).
  Status WriteShardRecord(uint64_t generation, uint64_t pending) REQUIRES(collective_mu_);

  // The items of MPI counts that go to (come from) other ranks than this one.
  uint64_t RemoteItems(std::span<const int> counts) const;
  // Adds the bytes of an all-to-all with these counts to the byte counters.
  void CountBytes(std::span<const int> sent, std::span<const int> received, uint64_t item_bytes);

  // Constant after Open.
  ClusterOptions options_;
  std::vector<TableOptions> tables_;
  io::Env* const env_;
  std::unique_ptr<MpiComm> comm_;
  std::unique_ptr<Store> shard_;
  std::vector<MPI_Datatype> row_types_;  // per table: dim contiguous floats
  std::optional<RoutePlan> plan_;        // kTwoPhase only

  std::atomic<uint32_t> workers_{0};
  std::atomic<bool> closed_{false};

  base::Mutex collective_mu_;
  uint64_t generation_ GUARDED_BY(collective_mu_) = 0;  // the last cluster checkpoint's
  KeyRouter router_ GUARDED_BY(collective_mu_);
  std::vector<Key> recv_keys_ GUARDED_BY(collective_mu_);
  // Rows of this rank's distinct keys (Pull: back from the owners; Push: the
  // summed gradients going out), and rows at the owner (Pull: read from the
  // shard for the ranks; Push: the gradients the ranks sent).
  std::vector<float> batch_rows_ GUARDED_BY(collective_mu_);
  std::vector<float> owner_rows_ GUARDED_BY(collective_mu_);
  KeyRouter owner_router_ GUARDED_BY(collective_mu_);         // Push: the owner's distinct keys
  std::vector<float> owner_sums_ GUARDED_BY(collective_mu_);  // Push: their summed gradients
  std::vector<Header> headers_out_ GUARDED_BY(collective_mu_);
  std::vector<Header> headers_in_ GUARDED_BY(collective_mu_);
  // The two-phase exchange's parcels: held here between stages, packed per
  // next hop, received.
  std::vector<char> parcels_held_ GUARDED_BY(collective_mu_);
  std::vector<char> parcels_out_ GUARDED_BY(collective_mu_);
  std::vector<char> parcels_in_ GUARDED_BY(collective_mu_);

  base::Mutex intent_mu_ ACQUIRED_AFTER(collective_mu_);
  std::vector<OwnerQueue> queues_ GUARDED_BY(intent_mu_);  // per owner rank

  mutable ExchangeCounters counters_;
};

}  // namespace strata::cluster
