// Store::Open and Close: the tables and their T0, the SSD tier (with its
// Env: the default one, or a FaultEnv injecting options.faults), T1 over it,
// the checkpoint meta read back, the planner and cleaner threads started;
// Close stops the threads and writes every dirty row down.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "base/log.h"
#include "base/thread_name.h"
#include "engine/fault_options.h"
#include "engine/store_impl.h"
#include "kernels/limits.h"
#include "storage/ssd/row_store_factory.h"

namespace strata {

Result<std::unique_ptr<Store>> Store::Open(const StoreOptions& options,
                                           const std::vector<TableOptions>& tables) {
  return engine::StoreImpl::Open(options, tables);
}

namespace engine {

namespace {

// FNV-1a of the table name: the initializer's seed, so a table's rows are
// the same whatever its position among the tables.
uint64_t NameSeed(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

StoreImpl::StoreImpl(const StoreOptions& options, const std::vector<TableOptions>& tables)
    : options_(options), table_options_(tables), intents_(tables.size()) {}

Result<std::unique_ptr<Store>> StoreImpl::Open(const StoreOptions& options,
                                               const std::vector<TableOptions>& tables,
                                               const SsdEnvs& envs) {
  STRATA_RETURN_IF_ERROR(ValidateOptions(options, tables));
  if (envs.env != nullptr && options.faults.enabled()) {
    return Status::InvalidArgument("Store::Open: StoreOptions.faults with an explicit SSD Env");
  }
  std::unique_ptr<StoreImpl> store(new StoreImpl(options, tables));
  store->ssd_envs_ = envs;
  Status s = store->LockDir();
  if (s.ok()) {
    s = store->Init();
    if (!s.ok()) {
      // Nothing to flush: Init failed before any row moved. Stop the tiers
      // before removing their files.
      store->dram_.reset();
      store->ssd_.reset();
      if (store->created_.store) store->RemoveCreated();
    }
  }
  if (!s.ok()) {
    store->close_.closed = true;
    base::MutexLock close_lock(&store->close_.mu);
    store->close_.finished = true;
    store->dir_lock_.reset();
    return s.WithContext("Store::Open(" + options.dir + ")");
  }
  return std::unique_ptr<Store>(std::move(store));
}

// The directory and its LOCK before anything in it is read: a second
// opener, in this process or another, gets Unavailable here and changes
// nothing (but the LOCK file it may have created: the lock is on the file,
// which holders leave in place). Then whether a store is there at all.
Status StoreImpl::LockDir() {
  io::Env* env = io::Env::Default();
  const std::string lock_path = options_.dir + "/" + kLockFileName;
  created_.dir = !env->FileExists(options_.dir);
  STRATA_RETURN_IF_ERROR(env->CreateDirs(options_.dir));
  created_.lock = !env->FileExists(lock_path);
  Result<std::unique_ptr<io::FileLock>> lock = env->LockFile(lock_path);
  if (!lock.ok()) {
    if (!lock.status().IsUnavailable()) return lock.status();
    return Status::Unavailable("store directory " + options_.dir + " is in use by another Store (" +
                               lock.status().message() +
                               "); one Store at a time may open a directory");
  }
  dir_lock_ = std::move(lock).value();
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(options_.dir));
  created_.store = std::all_of(names.begin(), names.end(),
                               [](const std::string& n) { return n == kLockFileName; });
  if (options_.error_if_exists && !created_.store) {
    return Status::FailedPrecondition("store directory " + options_.dir +
                                      " is not empty (StoreOptions.error_if_exists)");
  }
  return Status::Ok();
}

// Under the lock: a locker that opened the LOCK file before it goes finds
// it gone once it holds it, and tries again (io/file_lock.h).
void StoreImpl::RemoveCreated() {
  std::error_code ec;
  std::vector<std::filesystem::path> entries;
  for (const auto& entry : std::filesystem::directory_iterator(options_.dir, ec)) {
    if (entry.path().filename() != kLockFileName || created_.lock) entries.push_back(entry.path());
  }
  if (created_.dir) entries = {options_.dir};
  for (const std::filesystem::path& path : entries) {
    std::error_code removed;
    std::filesystem::remove_all(path, removed);
    if (removed) {
      STRATA_LOG_WARN("store %s: removing %s after a failed Open: %s", options_.dir.c_str(),
                      path.c_str(), removed.message().c_str());
    }
  }
}

Status StoreImpl::Init() {
  runner_ = kernels::DefaultRunner(options_.use_gpu);
  if (options_.fallback_policy == FallbackPolicy::kLfu) {
    const uint64_t rows = options_.device_rows_max + options_.dram_rows_max;
    fallback_.sketch =
        std::make_unique<FrequencySketch>(std::min(kSketchWidthMax, rows * kSketchWidthPerRow));
  }
  double weight_sum = 0;
  for (const TableOptions& t : table_options_) weight_sum += t.device_rows_weight;
  // Shares by weight, each at least kTableT0RowsMin, summing to at most
  // device_rows_max (Open checked there is room for the minimum).
  const uint64_t spare = options_.device_rows_max - table_options_.size() * kTableT0RowsMin;
  std::vector<storage::TableSpec> specs;
  uint64_t row_bytes_total = 0;
  for (size_t i = 0; i < table_options_.size(); ++i) {
    const TableOptions& opt = table_options_[i];
    const uint64_t share =
        kTableT0RowsMin +
        static_cast<uint64_t>(double(spare) * (opt.device_rows_weight / weight_sum));
    auto table = std::make_unique<Table>();
    table->id = static_cast<TableId>(i);
    table->name = opt.name;
    table->dim = opt.dim;
    table->optimizer = opt.optimizer;
    table->init.kind = opt.initializer;
    table->init.scale = opt.init_scale;
    table->init.seed = NameSeed(opt.name);
    table->row_floats = opt.dim + kernels::StateFloats(table->optimizer.kind, opt.dim);
    table->row_bytes = table->row_floats * sizeof(float);
    table->t0_share = share;
    // The most it may hold when T0's one order favours it: its share grown
    // by device_share_growth_max, at most all of T0 (slots are reserved for
    // it, so this is what T0's memory costs).
    table->t0_rows_cap = std::min<uint64_t>(
        options_.device_rows_max,
        static_cast<uint64_t>(std::ceil(double(share) * (1.0 + options_.device_share_growth_max))));

    kernels::DeviceTableOptions dt;
    // The table sizes its slots for capacity_rows at its own load factor
    // limit; ask for more so `t0_rows_cap` rows fill kDeviceLoadFactorMax.
    dt.capacity_rows = static_cast<uint64_t>(
        std::ceil(double(table->t0_rows_cap) * kernels::kLoadFactorMax / kDeviceLoadFactorMax));
    dt.dim = opt.dim;
    dt.optimizer = table->optimizer;
    dt.initializer = table->init;
    dt.batch_keys_max =
        std::min<uint64_t>(kBatchKeysMax, std::max<uint64_t>(table->t0_rows_cap, 1 << 16));
    dt.host_threads = 0;
    auto created = kernels::DeviceTable::Create(dt, runner_);
    if (!created.ok()) return created.status().WithContext("table '" + opt.name + "'");
    {
      base::MutexLock table_lock(&table->mu);  // not shared yet; for the analysis
      table->t0 = std::make_unique<DeviceTier>(std::move(created).value());
    }

    specs.push_back({table->id, opt.name, table->row_bytes, opt.expected_rows});
    row_bytes_total += table->row_bytes;
    tables_.push_back(std::move(table));
  }

  storage::RowStoreOptions ssd_options;
  ssd_options.backend = options_.ssd_backend;
  ssd_options.dir = options_.dir + "/ssd";
  ssd_options.io_threads = options_.io_threads;
  ssd_options.write_log_fraction = options_.ssd_write_log_fraction;
  ssd_options.ssd_format_version = options_.ssd_format_version;
  ssd_options.ssd_segment_bytes = options_.ssd_segment_bytes;
  ssd_options.ssd_index = options_.ssd_index;
  ssd_options.ssd_range_bits = options_.ssd_range_bits;
  ssd_options.ssd_merge_log_fraction = options_.ssd_merge_log_fraction;
  ssd_options.rocksdb_env = ssd_envs_.rocksdb_env;
  STRATA_ASSIGN_OR_RETURN(ssd_options.env, MakeSsdEnv());
  STRATA_ASSIGN_OR_RETURN(ssd_, storage::OpenRowStore(ssd_options, specs));

  storage::DramCacheOptions dram_options;
  // Capacity in rows of the average row size of the tables (Open bounded
  // both factors; checked all the same).
  if (__builtin_mul_overflow(options_.dram_rows_max, row_bytes_total / specs.size(),
                             &dram_options.dram_bytes_max)) {
    return Status::InvalidArgument(
        "StoreOptions.dram_rows_max = " + std::to_string(options_.dram_rows_max) +
        ": times the row bytes overflows 64 bits");
  }
  // T1 follows the engine's order, for both fallback policies: intents
  // (clocks) farthest first, fallback values (above every clock) by their
  // score below the top of their span, least first.
  // A move up (MakeResident) takes at most T0's rows out of T1 at once.
  dram_options.transit_rows_max = options_.device_rows_max;
  dram_options.shards = options_.dram_shards;
  dram_options.fallback_base = kFallbackBase;
  dram_options.fallback_end = kFallbackBase + kFallbackSpan;
  STRATA_ASSIGN_OR_RETURN(dram_, storage::DramCache::Create(dram_options, specs, ssd_.get()));

  STRATA_RETURN_IF_ERROR(RestoreMeta(ssd_->CheckpointMeta()));
  planner_.thread = std::thread([this] { PlannerLoop(); });
  base::NameThread(planner_.thread.native_handle(), "strata-plan");
  cleaner_.thread = std::thread([this] { CleanerLoop(); });
  base::NameThread(cleaner_.thread.native_handle(), "strata-clean");
  STRATA_LOG_INFO("store %s open: %zu tables, T0 %s, %llu device rows, %llu DRAM rows",
                  options_.dir.c_str(), tables_.size(),
                  runner_ == kernels::Runner::kGpu ? "GPU" : "host",
                  static_cast<unsigned long long>(options_.device_rows_max),
                  static_cast<unsigned long long>(options_.dram_rows_max));
  return Status::Ok();
}

// The SSD tier's Env: the one given to Open, the default one, or a FaultEnv
// over the default injecting options_.faults into every read and write of
// the SSD files.
Result<io::Env*> StoreImpl::MakeSsdEnv() {
  if (ssd_envs_.env != nullptr) return ssd_envs_.env;
  if (!options_.faults.enabled()) return io::Env::Default();
  STRATA_ASSIGN_OR_RETURN(fault_env_, MakeFaultEnv(options_.faults, io::Env::Default()));
  const FaultOptions& f = options_.faults;
  STRATA_LOG_WARN("store %s: injecting SSD faults: EIO %g, ENOSPC %g, delay %llu us, seed %llu",
                  options_.dir.c_str(), f.eio_probability, f.enospc_probability,
                  static_cast<unsigned long long>(f.delay_us),
                  static_cast<unsigned long long>(f.seed));
  return static_cast<io::Env*>(fault_env_.get());
}

StoreImpl::~StoreImpl() {
  Status s = Close();
  if (!s.ok()) STRATA_LOG_ERROR("Store close in destructor: %s", s.ToString().c_str());
}

StoreImpl::CallScope::CallScope(const StoreImpl* store)
    : close_(&store->close_), dir_(&store->options_.dir) {
  // Counted before `closed` is read, both sequentially consistent: Close sets
  // `closed` before it reads `calls`, so either it waits for this call or
  // this call sees `closed`.
  close_->calls.fetch_add(1, std::memory_order_seq_cst);
  closed_ = close_->closed.load(std::memory_order_seq_cst);
}

StoreImpl::CallScope::~CallScope() {
  if (close_->calls.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
      close_->closed.load(std::memory_order_seq_cst)) {
    base::MutexLock lock(&close_->calls_mu);
    close_->calls_done.SignalAll();
  }
}

Status StoreImpl::CallScope::status() const {
  if (closed_) return Status::FailedPrecondition("store " + *dir_ + " is closed");
  return Status::Ok();
}

void StoreImpl::WaitForCalls() {
  base::MutexLock lock(&close_.calls_mu);
  while (close_.calls.load(std::memory_order_seq_cst) != 0)
    close_.calls_done.Wait(&close_.calls_mu);
}

Status StoreImpl::Close() {
  base::MutexLock close_lock(&close_.mu);
  // The first call stops new work; a call after a failed one (an I/O error
  // while writing dirty rows down) tries the write-back again, so a caller
  // that retries Close loses nothing.
  if (close_.finished) return Status::Ok();
  close_.closed.store(true, std::memory_order_seq_cst);
  // A Push in flight applies before the rows are written down, not after.
  WaitForCalls();
  planner_.Stop();
  cleaner_.Stop();
  if (!ssd_ || !dram_) return Status::Ok();
  Status first;
  for (auto& table : tables_) {
    base::MutexLock lock(&table->mu);
    Status s = WriteBackT0(*table);
    if (first.ok() && !s.ok()) first = s;
  }
  Status s = dram_->FlushDirty();
  if (first.ok() && !s.ok()) first = s;
  s = ssd_->Sync();
  if (first.ok() && !s.ok()) first = s;
  close_.finished = first.ok();
  if (close_.finished) {
    // Everything is written down: release the tiers (the RocksDB database
    // and its lock with them), then the directory, so a new Store may open
    // it while this object lives on.
    StoreStats last = LiveStats();
    {
      base::MutexLock lock(&close_.calls_mu);
      close_.final_stats = last;
      close_.tiers_released = true;
    }
    // A Stats() that saw the tiers before the line above still reads them.
    WaitForCalls();
    dram_.reset();
    ssd_.reset();
    dir_lock_.reset();
  }
  return first.WithContext("Close(" + options_.dir + ")");
}

}  // namespace engine
}  // namespace strata
