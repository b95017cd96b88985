// ClusterImpl: the Cluster behind include/strata/cluster.h, over a Comm
// (comm.h): MpiComm for the MPI form, NcclComm for the NCCL form.
//
// Files, one concern each (all define ClusterImpl members):
//   cluster_open.cc        Open: the communicator, the table check across
//                          ranks, the manifest and shard checks, the shard;
//                          RegisterWorker, Close
//   cluster_data.cc        Pull and Push: route, header all-to-all, keys
//                          (and gradients) to owners, rows back
//   cluster_device.cc      the same over device buffers (the NCCL form)
//   cluster_exchange.cc    the exchange plan (flat or two-phase) and the
//                          all-to-all along its routes
//   cluster_intent.cc      Intent queues per owner, their delivery at
//                          AdvanceClock and DrainIntents
//   cluster_checkpoint.cc  Checkpoint: kept copies, shard records, shards,
//                          manifest; the roll-back at Open
//   shard_backup.h         a shard's kept previous checkpoint
//   cluster_stats.cc       Stats and SummedStats
//   key_router.h           distinct keys grouped by owner
//   comm.h                 the collectives as Status; AgreeOn
//   mpi_comm.h, nccl_comm.h  the Comm over MPI, over NCCL
//   manifest.h             CLUSTER and CLUSTER_SHARD files
//
// Locking: collective_mu_ serializes the collective calls of one rank (and
// guards their scratch and the checkpoint generation); intent_mu_ (a leaf,
// taken inside collective_mu_ by the delivery, alone by Intent) guards the
// queued intents. Counters are atomics, read by Stats without a lock.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "cluster/comm.h"
#include "cluster/key_router.h"
#include "cluster/route_plan.h"
#include "io/env.h"
#include "strata/cluster.h"

namespace strata::cluster {

struct ExchangeCounters {
  std::atomic<uint64_t> pull_calls{0}, push_calls{0};
  std::atomic<uint64_t> keys_sent{0}, keys_served{0};
  std::atomic<uint64_t> bytes_sent{0}, bytes_received{0};
  std::atomic<uint64_t> intents_sent{0};
  // Nanoseconds, so that short calls do not each round away a part of a
  // microsecond; Stats() reports microseconds.
  std::atomic<uint64_t> exchange_ns{0};
  std::atomic<uint64_t> bytes_forwarded{0};
  std::atomic<uint64_t> exchange_calls{0}, align_wait_ns{0};
};

// Push sends each key with its gradients in one item: the key's bytes as
// this many floats, then the row.
constexpr size_t kKeyFloats = sizeof(Key) / sizeof(float);
static_assert(kKeyFloats * sizeof(float) == sizeof(Key));

// A shard call failing with IOError or ResourceExhausted (an SSD error, a
// tier full for the moment) is retried by the owner itself, at most
// kOwnerAttemptsMax times with a backoff doubling from kOwnerBackoffMin to
// kOwnerBackoffMax (under a second in all, far below any collective
// timeout): a Store call that fails changes nothing, so the retry is safe,
// and a Push then fails across ranks only when one owner's shard keeps
// failing, not on every transient error of one of R shards.
constexpr uint32_t kOwnerAttemptsMax = 64;
constexpr auto kOwnerBackoffMin = std::chrono::microseconds(100);
constexpr auto kOwnerBackoffMax = std::chrono::milliseconds(10);

template <typename Fn>
Status ServeRetried(Fn&& fn) {
  auto backoff = std::chrono::microseconds(kOwnerBackoffMin);
  Status s = fn();
  for (uint32_t i = 1; i < kOwnerAttemptsMax && (s.IsIOError() || s.IsResourceExhausted()); ++i) {
    std::this_thread::sleep_for(backoff);
    backoff = std::min<std::chrono::microseconds>(2 * backoff, kOwnerBackoffMax);
    s = fn();
  }
  return s;
}

// Microseconds since `start`.
uint64_t NanosSince(std::chrono::steady_clock::time_point start);
// `served`, an owner's failed part of a Push after ServeRetried: an IOError
// or ResourceExhausted becomes FailedPrecondition, since other owners may
// have applied their parts and a retry of the whole Push would apply them
// twice.
Status NotRetriable(const Status& served);

// A grow-only buffer of device memory (the NCCL form's scratch).
class DeviceScratch {
 public:
  DeviceScratch() = default;
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  // At least `bytes` at data(); the contents are not kept.
  [[nodiscard]] Status Reserve(size_t bytes);
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class ClusterImpl final : public Cluster {
 public:
  // `env`: the cluster's own files (manifest, shard records, the shards'
  // kept checkpoints; tests inject faults and crashes); the shards' Stores
  // use io::Env::Default(). Not owned; outlives the cluster.
  static Result<std::unique_ptr<Cluster>> Open(const ClusterOptions& options,
                                               const std::vector<TableOptions>& tables,
                                               MPI_Comm comm, io::Env* env);
  // Over `comm` (Collective; its timeout set here).
  static Result<std::unique_ptr<Cluster>> Open(const ClusterOptions& options,
                                               const std::vector<TableOptions>& tables,
                                               std::unique_ptr<Comm> comm, io::Env* env);
  ~ClusterImpl() override;

  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->size(); }
  Result<WorkerId> RegisterWorker() override EXCLUDES(collective_mu_);
  Status Intent(WorkerId worker, TableId table, std::span<const Key> keys, Clock start,
                Clock end) override EXCLUDES(intent_mu_);
  Status AdvanceClock(WorkerId worker) override EXCLUDES(collective_mu_);
  Result<Clock> CurrentClock(WorkerId worker) const override;
  Status Pull(WorkerId worker, TableId table, std::span<const Key> keys, float* out,
              void* stream) override EXCLUDES(collective_mu_);
  Status Push(WorkerId worker, TableId table, std::span<const Key> keys, const float* grads,
              void* stream) override EXCLUDES(collective_mu_);
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
              std::unique_ptr<Comm> comm, io::Env* env);

  // Open (cluster_open.cc).
  Status CheckTablesAcrossRanks() REQUIRES(collective_mu_);
  // This rank's lock on its shard (dir/rank-<r>.LOCK), taken before the
  // manifest or the shard is read, so a second cluster on the directory
  // recovers and opens nothing; held until Close (the shard's own Store
  // locks its directory as well).
  Status LockShard() REQUIRES(collective_mu_);
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
  // Pull's start: routes `keys` (when `local` is OK), exchanges the headers
  // and sends the keys.
  Status RouteAndSendKeys(const Status& local, WorkerId worker, TableId table,
                          std::span<const Key> keys, std::vector<int>* recv_counts)
      REQUIRES(collective_mu_);
  // Sends router_.grouped() to the owners into recv_keys_ (host memory on
  // either form).
  Status SendKeys(std::span<const int> recv_counts) REQUIRES(collective_mu_);

  // comm_->AllToAllv over host buffers on either form: staged through device
  // memory on the NCCL form (cluster_device.cc).
  Status ExchangeHostBuffers(const void* send, std::span<const int> send_counts, void* recv,
                             std::span<const int> recv_counts, size_t item_bytes)
      REQUIRES(collective_mu_);
  // The NCCL form's Pull and Push (cluster_device.cc), after the local check.
  Status PullOnDevice(const Status& local, WorkerId worker, TableId table,
                      std::span<const Key> keys, float* out) REQUIRES(collective_mu_);
  Status PushOnDevice(const Status& local, WorkerId worker, TableId table,
                      std::span<const Key> keys, const float* grads) REQUIRES(collective_mu_);
  // `checked` (a call's local check), after pointing *keys where the host can
  // read them: at themselves, or at their copy in host_keys_ when they are
  // device memory (an error copying them is the call's local error).
  Status KeysOnHost(const Status& checked, std::span<const Key>* keys) REQUIRES(collective_mu_);
  // index_ = the rows of each of `groups` slots in `slots`, grouped by slot in
  // ascending order, then the groups' starts (kernels::detail::GpuSumRowGroups),
  // copied to the device.
  Status UploadGroups(std::span<const uint32_t> slots, size_t groups) REQUIRES(collective_mu_);

  // The exchange plan (cluster_exchange.cc): builds plan_ from the options
  // and checks that every rank has the same.
  Status PlanExchange() REQUIRES(collective_mu_);
  // comm_->AllToAllv's contract, along plan_'s routes (straight when flat).
  Status Exchange(const void* send, std::span<const int> send_counts, void* recv,
                  std::span<const int> recv_counts, size_t item_bytes) REQUIRES(collective_mu_);

  // Intent delivery (cluster_intent.cc).
  Status DeliverIntents() REQUIRES(collective_mu_) EXCLUDES(intent_mu_);

  // Checkpoint (cluster_checkpoint.cc).
  Status WriteShardRecord(uint64_t generation, uint64_t pending) REQUIRES(collective_mu_);

  // Each all-to-all of Pull and Push (headers, keys, rows, gradients) runs
  // between BeginExchange, which sets *start, and EndExchange, which counts
  // the time since *start in exchange_ns; under
  // ClusterOptions::align_exchanges each adds a barrier (before *start, and
  // after the count), timed in align_wait_ns.
  Status BeginExchange(std::chrono::steady_clock::time_point* start);
  Status EndExchange(std::chrono::steady_clock::time_point start);

  // The items of counts that go to (come from) other ranks than this one.
  uint64_t RemoteItems(std::span<const int> counts) const;
  // Adds the bytes of an all-to-all with these counts to the byte counters.
  void CountBytes(std::span<const int> sent, std::span<const int> received, uint64_t item_bytes);

  // Constant after Open.
  ClusterOptions options_;
  std::vector<TableOptions> tables_;
  io::Env* const env_;
  std::unique_ptr<Comm> comm_;
  std::unique_ptr<Store> shard_;
  std::unique_ptr<io::FileLock> shard_lock_;
  bool shard_on_gpu_ = false;      // the shard's T0 is on the GPU (NCCL form)
  std::optional<RoutePlan> plan_;  // kTwoPhase only

  std::atomic<uint32_t> workers_{0};
  std::atomic<bool> closed_{false};

  base::Mutex collective_mu_;
  uint64_t generation_ GUARDED_BY(collective_mu_) = 0;  // the last cluster checkpoint's
  KeyRouter router_ GUARDED_BY(collective_mu_);
  std::vector<Key> recv_keys_ GUARDED_BY(collective_mu_);
  // Rows of this rank's distinct keys (Pull: back from the owners; Push: each
  // key then its summed gradients, kKeyFloats + dim floats, going out), and
  // rows at the owner (Pull: read from the shard for the ranks; Push: the keys
  // and gradients the ranks sent, in the same items).
  std::vector<float> batch_rows_ GUARDED_BY(collective_mu_);
  std::vector<float> owner_rows_ GUARDED_BY(collective_mu_);
  KeyRouter owner_router_ GUARDED_BY(collective_mu_);         // Push: the owner's distinct keys
  std::vector<float> owner_sums_ GUARDED_BY(collective_mu_);  // Push: their summed gradients
  std::vector<Header> headers_out_ GUARDED_BY(collective_mu_);
  std::vector<Header> headers_in_ GUARDED_BY(collective_mu_);
  std::vector<int32_t> header_codes_ GUARDED_BY(collective_mu_);  // headers_in_'s codes
  std::vector<int> recv_counts_ GUARDED_BY(collective_mu_);       // keys from each rank
  // The two-phase exchange's parcels: held here between stages, packed per
  // next hop, received.
  std::vector<char> parcels_held_ GUARDED_BY(collective_mu_);
  std::vector<char> parcels_out_ GUARDED_BY(collective_mu_);
  std::vector<char> parcels_in_ GUARDED_BY(collective_mu_);
  // The NCCL form's scratch: device memory (keys out and in, rows of this
  // rank's distinct keys, rows at the owner, the owner's summed gradients,
  // index_ on the device) and host memory (device keys copied back, groups).
  DeviceScratch device_keys_out_ GUARDED_BY(collective_mu_);
  DeviceScratch device_keys_in_ GUARDED_BY(collective_mu_);
  DeviceScratch device_batch_rows_ GUARDED_BY(collective_mu_);
  DeviceScratch device_owner_rows_ GUARDED_BY(collective_mu_);
  DeviceScratch device_owner_sums_ GUARDED_BY(collective_mu_);
  DeviceScratch device_index_ GUARDED_BY(collective_mu_);
  std::vector<Key> host_keys_ GUARDED_BY(collective_mu_);
  std::vector<uint32_t> index_ GUARDED_BY(collective_mu_);

  base::Mutex intent_mu_ ACQUIRED_AFTER(collective_mu_);
  std::vector<OwnerQueue> queues_ GUARDED_BY(intent_mu_);  // per owner rank

  mutable ExchangeCounters counters_;
};

}  // namespace strata::cluster
