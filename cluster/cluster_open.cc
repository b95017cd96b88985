// Cluster::Open, RegisterWorker and Close, and the checks every call makes.
//
// Open, on every rank: duplicate the communicator (MPI_Comm_dup, or NCCL's:
// ncclCommSplit of the pipeline's, or ncclCommInitRank over MPI); check that every rank
// passed the same tables; read the cluster manifest (rank 0) and every
// shard's record, and refuse a different world size or shards that are not
// at the manifest's generation; open the shard. Each step ends in AgreeOn, so
// a failure anywhere fails Open on every rank with the same message.
#include <cinttypes>
#include <cstdio>

#include "cluster/cluster_impl.h"
#include "cluster/manifest.h"
#include "cluster/mpi_comm.h"
#include "engine/limits.h"
#include "io/env.h"
#include "kernels/gpu_runtime.h"

#if STRATA_HAVE_NCCL
#include "cluster/nccl_comm.h"
#endif

namespace strata {

Result<std::unique_ptr<Cluster>> Cluster::Open(const ClusterOptions& options,
                                               const std::vector<TableOptions>& tables,
                                               MPI_Comm comm) {
  return cluster::ClusterImpl::Open(options, tables, comm, io::Env::Default());
}

Result<std::unique_ptr<Cluster>> Cluster::Open(const ClusterOptions& options,
                                               const std::vector<TableOptions>& tables,
                                               ncclComm_t comm) {
  const std::string context = "Cluster::Open(" + options.store.dir + ")";
#if STRATA_HAVE_NCCL
  Result<std::unique_ptr<cluster::NcclComm>> nccl =
      cluster::NcclComm::Split(comm, options.collective_timeout_ms);
  if (!nccl.ok()) return nccl.status().WithContext(context);
  return cluster::ClusterImpl::Open(options, tables, std::move(nccl).value(), io::Env::Default());
#else
  (void)tables, (void)comm;
  return Status::FailedPrecondition(context + ": the NCCL form, but this build has no NCCL");
#endif
}

namespace cluster {
namespace {

// One line per table: every option that changes the rows (device_rows_weight
// only splits a shard's T0, so ranks may differ in it).
std::string DescribeTables(const std::vector<TableOptions>& tables) {
  std::string out;
  for (const TableOptions& t : tables) {
    const OptimizerOptions& o = t.optimizer;
    char line[512];
    std::snprintf(line, sizeof(line),
                  " dim=%u optimizer=%d lr=%a eps=%a acc0=%a b1=%a b2=%a ftrl=%a,%a,%a,%a "
                  "init=%d scale=%a\n",
                  t.dim, static_cast<int>(o.kind), o.learning_rate, o.epsilon,
                  o.initial_accumulator, o.beta1, o.beta2, o.ftrl_alpha, o.ftrl_beta, o.ftrl_l1,
                  o.ftrl_l2, static_cast<int>(t.initializer), t.init_scale);
    out += "'" + t.name + "'" + line;
  }
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

}  // namespace

ClusterImpl::ClusterImpl(const ClusterOptions& options, const std::vector<TableOptions>& tables,
                         std::unique_ptr<Comm> comm, io::Env* env)
    : options_(options), tables_(tables), env_(env), comm_(std::move(comm)) {
  queues_.resize(comm_->size());
}

Result<std::unique_ptr<Cluster>> ClusterImpl::Open(const ClusterOptions& options,
                                                   const std::vector<TableOptions>& tables,
                                                   MPI_Comm comm, io::Env* env) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<MpiComm> dup, MpiComm::Dup(comm));
  dup->SetTimeout(options.collective_timeout_ms);
  if (options.transport == ClusterTransport::kMpi)
    return Open(options, tables, std::move(dup), env);
  const std::string context = "Cluster::Open(" + options.store.dir + ")";
#if STRATA_HAVE_NCCL
  Result<std::unique_ptr<NcclComm>> nccl =
      NcclComm::Create(dup.get(), options.collective_timeout_ms);
  if (!nccl.ok()) return nccl.status().WithContext(context);
  return Open(options, tables, std::move(nccl).value(), env);
#else
  // Every rank runs the same build, so every rank refuses alike.
  return Status::FailedPrecondition(context +
                                    ": ClusterTransport::kNccl, but this build has no NCCL");
#endif
}

Result<std::unique_ptr<Cluster>> ClusterImpl::Open(const ClusterOptions& options,
                                                   const std::vector<TableOptions>& tables,
                                                   std::unique_ptr<Comm> comm, io::Env* env) {
  comm->SetTimeout(options.collective_timeout_ms);
  std::unique_ptr<ClusterImpl> cluster(new ClusterImpl(options, tables, std::move(comm), env));
  const std::string context = "Cluster::Open(" + options.store.dir + ")";
  base::MutexLock lock(&cluster->collective_mu_);
  STRATA_RETURN_IF_ERROR(cluster->CheckTablesAcrossRanks().WithContext(context));
  STRATA_RETURN_IF_ERROR(cluster->PlanExchange().WithContext(context));
  STRATA_RETURN_IF_ERROR(cluster->LockShard().WithContext(context));
  STRATA_RETURN_IF_ERROR(cluster->CheckManifest().WithContext(context));
  STRATA_RETURN_IF_ERROR(cluster->OpenShard().WithContext(context));
  return std::unique_ptr<Cluster>(std::move(cluster));
}

ClusterImpl::~ClusterImpl() {
  if (!closed_.exchange(true) && shard_ != nullptr) {
    Status s = shard_->Close();  // local only: a destructor joins no collective
    if (!s.ok()) std::fprintf(stderr, "strata: ~Cluster: %s\n", s.ToString().c_str());
  }
}

DeviceScratch::~DeviceScratch() { kernels::detail::GpuFree(data_); }

Status DeviceScratch::Reserve(size_t bytes) {
  if (bytes <= bytes_) return Status::Ok();
  const size_t grown = std::max(bytes, 2 * bytes_);
  kernels::detail::GpuFree(data_);  // cudaFree waits for the device's work
  data_ = nullptr;
  bytes_ = 0;
  STRATA_RETURN_IF_ERROR(kernels::detail::GpuAllocate(grown, &data_));
  bytes_ = grown;
  return Status::Ok();
}

Status ClusterImpl::CheckTablesAcrossRanks() {
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> all,
                          comm_->AllGatherBytes(DescribeTables(tables_)));
  const std::vector<std::string> first = Lines(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const std::vector<std::string> lines = Lines(all[r]);
    const std::string rank = "rank " + std::to_string(r);
    for (size_t t = 0; t < std::min(lines.size(), first.size()); ++t) {
      if (lines[t] == first[t]) continue;
      return Status::InvalidArgument(rank + "'s table " + std::to_string(t) +
                                     " differs from rank 0's: " + rank + " has " + lines[t] +
                                     ", rank 0 has " + first[t]);
    }
    return Status::InvalidArgument(rank + " has " + std::to_string(lines.size()) +
                                   " tables, rank 0 has " + std::to_string(first.size()) +
                                   ": every rank passes the same tables");
  }
  return Status::Ok();
}

Status ClusterImpl::LockShard() {
  const std::string& dir = options_.store.dir;
  Status local = env_->CreateDirs(dir);
  if (local.ok()) {
    const std::string path = ShardDir(dir, rank()) + ".LOCK";
    Result<std::unique_ptr<io::FileLock>> lock = io::Env::Default()->LockFile(path);
    if (!lock.ok()) {
      local = lock.status().IsUnavailable()
                  ? Status::Unavailable("rank " + std::to_string(rank()) + "'s shard of " + dir +
                                        " is in use by another cluster (" +
                                        lock.status().message() + ")")
                  : lock.status();
    } else {
      shard_lock_ = std::move(lock).value();
    }
  }
  return comm_->AgreeOn(local);
}

Status ClusterImpl::CheckManifest() {
  io::Env* env = env_;
  const std::string& dir = options_.store.dir;
  // Rank 0 reads the manifest and hands its bytes to everyone (ranks on other
  // nodes may not see rank 0's disk).
  std::string text;
  Status read = Status::Ok();
  if (rank() == 0) {
    Result<std::optional<std::string>> got = ReadSmallFile(env, dir, kManifestName);
    if (!got.ok()) read = got.status();
    if (got.ok() && got->has_value()) text = **got;
  }
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(read));
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> all, comm_->AllGatherBytes(text));
  ClusterManifest manifest;
  manifest.world_size = static_cast<uint32_t>(world_size());
  manifest.ownership = kClusterOwnershipName;
  manifest.rank_generations.assign(world_size(), 0);
  if (!all[0].empty()) {
    const std::string path = dir + "/" + kManifestName;
    STRATA_ASSIGN_OR_RETURN(manifest, DecodeClusterManifest(all[0], path));
    if (manifest.world_size != static_cast<uint32_t>(world_size())) {
      return Status::InvalidArgument(
          path + " was written by a cluster of " + std::to_string(manifest.world_size) +
          " ranks; this one has " + std::to_string(world_size()) + " (reopen with " +
          std::to_string(manifest.world_size) + " ranks, or reshard the directory)");
    }
    if (manifest.ownership != kClusterOwnershipName) {
      return Status::InvalidArgument(path + ": ownership function '" + manifest.ownership +
                                     "', this build places rows by '" + kClusterOwnershipName +
                                     "'");
    }
  }
  // Every shard must hold the manifest's generation and no interrupted
  // checkpoint: one that a crash left past it goes back to its kept copy.
  const std::string shard_dir = ShardDir(dir, rank());
  const uint64_t want = manifest.rank_generations[rank()];
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(RecoverShard(want)));
  Status local = Status::Ok();
  Result<std::optional<std::string>> got = ReadSmallFile(env, shard_dir, kShardRecordName);
  if (!got.ok()) local = got.status();
  if (got.ok()) {
    ShardRecord record;
    record.rank = static_cast<uint32_t>(rank());
    record.world_size = static_cast<uint32_t>(world_size());
    if (got->has_value()) {
      Result<ShardRecord> decoded = DecodeShardRecord(**got, shard_dir + "/" + kShardRecordName);
      if (decoded.ok()) record = *decoded;
      if (!decoded.ok()) local = decoded.status();
    }
    if (local.ok() && (record.generation != want || record.pending != record.generation ||
                       record.rank != static_cast<uint32_t>(rank()))) {
      local = Status::FailedPrecondition(
          shard_dir + " holds rank " + std::to_string(record.rank) + "'s shard at generation " +
          std::to_string(record.generation) + " (pending " + std::to_string(record.pending) +
          "), the cluster manifest has rank " + std::to_string(rank()) + " at generation " +
          std::to_string(want) +
          ": the shards are not at one generation (a cluster checkpoint was interrupted, and "
          "the shard kept no copy of generation " +
          std::to_string(want) + " to go back to)");
    }
  }
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(local));
  generation_ = manifest.generation;
  return Status::Ok();
}

Status ClusterImpl::OpenShard() {
  StoreOptions store = options_.store;
  store.dir = ShardDir(options_.store.dir, rank());
  // The MPI form exchanges host buffers; the NCCL form device buffers, and
  // a shard with T0 in host memory (use_gpu false) goes through host copies.
  if (!comm_->data_on_device()) store.use_gpu = false;
  Status local = env_->CreateDirs(options_.store.dir);
  if (local.ok()) {
    Result<std::unique_ptr<Store>> opened = Store::Open(store, tables_);
    if (opened.ok()) {
      shard_ = std::move(opened).value();
      shard_on_gpu_ = shard_->Stats().t0_on_gpu;
    } else {
      local = opened.status();
    }
  }
  return comm_->AgreeOn(local);
}

Status ClusterImpl::CheckOpen() const {
  if (closed_.load(std::memory_order_acquire)) {
    return Status::FailedPrecondition("the cluster is closed");
  }
  return Status::Ok();
}

Status ClusterImpl::CheckCall(WorkerId worker, TableId table, std::span<const Key> keys,
                              const void* data, const char* what) const {
  STRATA_RETURN_IF_ERROR(CheckOpen());
  const uint32_t workers = workers_.load(std::memory_order_acquire);
  if (worker >= workers) {
    return Status::InvalidArgument(std::string(what) + ": worker " + std::to_string(worker) +
                                   " is not registered (" + std::to_string(workers) + " are)");
  }
  if (table >= tables_.size()) {
    return Status::InvalidArgument(std::string(what) + ": table " + std::to_string(table) +
                                   " does not exist (" + std::to_string(tables_.size()) +
                                   " tables)");
  }
  if (keys.size() > engine::kBatchKeysMax) {
    return Status::InvalidArgument(std::string(what) + ": " + std::to_string(keys.size()) +
                                   " keys, at most " + std::to_string(engine::kBatchKeysMax));
  }
  if (!keys.empty() && (keys.data() == nullptr || data == nullptr)) {
    return Status::InvalidArgument(std::string(what) + ": a null keys or data buffer");
  }
  return Status::Ok();
}

Result<WorkerId> ClusterImpl::RegisterWorker() {
  base::MutexLock lock(&collective_mu_);
  Status local = CheckOpen();
  WorkerId id = 0;
  if (local.ok()) {
    Result<WorkerId> got = shard_->RegisterWorker(-1);
    if (got.ok()) id = *got;
    if (!got.ok()) local = got.status();
  }
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(local.WithContext("Cluster::RegisterWorker")));
  std::vector<uint32_t> ids(world_size());
  STRATA_RETURN_IF_ERROR(comm_->AllGather(&id, ids.data(), sizeof(id)));
  for (int r = 1; r < world_size(); ++r) {
    if (ids[r] != ids[0]) {
      return Status::Internal("Cluster::RegisterWorker: rank " + std::to_string(r) +
                              " registered worker " + std::to_string(ids[r]) + ", rank 0 worker " +
                              std::to_string(ids[0]));
    }
  }
  workers_.store(id + 1, std::memory_order_release);
  return id;
}

Status ClusterImpl::AgreeOn(const Status& local) {
  base::MutexLock lock(&collective_mu_);
  const Status open = CheckOpen();
  return comm_->AgreeOn(open.ok() ? local : open);
}

Result<Clock> ClusterImpl::CurrentClock(WorkerId worker) const {
  STRATA_RETURN_IF_ERROR(CheckOpen());
  return shard_->CurrentClock(worker);
}

Status ClusterImpl::Close() {
  base::MutexLock lock(&collective_mu_);
  if (closed_.exchange(true, std::memory_order_acq_rel)) return Status::Ok();
  const Status closed = shard_->Close();
  if (closed.ok()) shard_lock_.reset();
  return comm_->AgreeOn(closed.WithContext("Cluster::Close"));
}

}  // namespace cluster
}  // namespace strata
