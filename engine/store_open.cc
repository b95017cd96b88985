// Store::Open, workers, the checkpoint meta and Close.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include "engine/store_impl.h"
#include "kernels/limits.h"
#include "storage/ssd/row_store_factory.h"
#include "base/log.h"

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

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > kTableNameBytesMax) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

Status ValidateOptions(const StoreOptions& options, const std::vector<TableOptions>& tables) {
  if (options.dir.empty()) return Status::InvalidArgument("StoreOptions.dir is empty");
  if (tables.empty()) return Status::InvalidArgument("Store::Open: no tables given");
  if (tables.size() > kTablesMax) {
    return Status::InvalidArgument("Store::Open: " + std::to_string(tables.size()) +
                                   " tables, at most " + std::to_string(kTablesMax));
  }
  if (options.device_rows_max < tables.size() * kTableT0RowsMin) {
    return Status::InvalidArgument(
        "StoreOptions.device_rows_max = " + std::to_string(options.device_rows_max) + " is below " +
        std::to_string(kTableT0RowsMin) + " rows per table (" + std::to_string(tables.size()) +
        " tables)");
  }
  if (options.dram_rows_max == 0) {
    return Status::InvalidArgument("StoreOptions.dram_rows_max must be at least 1");
  }
  if (options.device_rows_max > kTierRowsMax || options.dram_rows_max > kTierRowsMax) {
    return Status::InvalidArgument(
        "StoreOptions.device_rows_max = " + std::to_string(options.device_rows_max) +
        ", dram_rows_max = " + std::to_string(options.dram_rows_max) + ": each at most " +
        std::to_string(kTierRowsMax));
  }
  if (!(options.device_share_growth_max >= 0 &&
        options.device_share_growth_max <= kDeviceShareGrowthMax)) {
    return Status::InvalidArgument("StoreOptions.device_share_growth_max = " +
                                   std::to_string(options.device_share_growth_max) +
                                   " must lie in [0, " + std::to_string(kDeviceShareGrowthMax) +
                                   "]");
  }
  if (!(options.timing_alpha > 0 && options.timing_alpha <= 1) ||
      !(options.timing_quantile > 0 && options.timing_quantile < 1) ||
      !(options.timing_lambda0 >= 0)) {
    return Status::InvalidArgument(
        "StoreOptions: timing_alpha must be in (0, 1], timing_quantile in (0, 1), "
        "timing_lambda0 >= 0");
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    const TableOptions& t = tables[i];
    if (!ValidName(t.name)) {
      return Status::InvalidArgument("table " + std::to_string(i) + ": name '" + t.name +
                                     "' must be 1-" + std::to_string(kTableNameBytesMax) +
                                     " characters of [A-Za-z0-9_.-]");
    }
    for (size_t j = 0; j < i; ++j) {
      if (tables[j].name == t.name) {
        return Status::InvalidArgument("table name '" + t.name + "' given twice");
      }
    }
    // dim, optimizer and init_scale: checked once, by DeviceTable::Create
    // (Init names the table).
    if (!(t.device_rows_weight > 0) || !std::isfinite(t.device_rows_weight)) {
      return Status::InvalidArgument("table '" + t.name +
                                     "': device_rows_weight must be finite and > 0");
    }
  }
  return Status::Ok();
}

}  // namespace

StoreImpl::StoreImpl(const StoreOptions& options, const std::vector<TableOptions>& tables)
    : options_(options), table_options_(tables), intents_(tables.size()) {}

Result<std::unique_ptr<Store>> StoreImpl::Open(const StoreOptions& options,
                                               const std::vector<TableOptions>& tables,
                                               const SsdEnvs& envs) {
  STRATA_RETURN_IF_ERROR(ValidateOptions(options, tables));
  if (envs.env != nullptr && !options.faults.empty()) {
    return Status::InvalidArgument("Store::Open: StoreOptions.faults with an explicit SSD Env");
  }
  std::unique_ptr<StoreImpl> store(new StoreImpl(options, tables));
  store->ssd_envs_ = envs;
  Status s = store->Init();
  if (!s.ok()) {
    store->closed_ = true;  // nothing to flush: Init failed before any row moved
    base::MutexLock close_lock(&store->close_mu_);
    store->close_finished_ = true;
    return s.WithContext("Store::Open(" + options.dir + ")");
  }
  return std::unique_ptr<Store>(std::move(store));
}

Status StoreImpl::Init() {
  runner_ = kernels::DefaultRunner(options_.use_gpu);
  if (options_.fallback_policy == FallbackPolicy::kLfu) {
    const uint64_t rows = options_.device_rows_max + options_.dram_rows_max;
    sketch_ =
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
    table->t0_rows_cap =
        static_cast<uint64_t>(std::ceil(double(share) * (1.0 + options_.device_share_growth_max)));
    table->t0_limit.store(share);

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
      table->t0 = std::move(created).value();
    }

    specs.push_back({table->id, opt.name, table->row_bytes});
    row_bytes_total += table->row_bytes;
    tables_.push_back(std::move(table));
  }

  storage::RowStoreOptions ssd_options;
  ssd_options.backend = options_.ssd_backend;
  ssd_options.dir = options_.dir + "/ssd";
  ssd_options.io_threads = options_.io_threads;
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
  // T1 follows the engine's order (next uses, then fallback values), for
  // both fallback policies.
  dram_options.eviction = storage::DramEviction::kIntent;
  STRATA_ASSIGN_OR_RETURN(dram_, storage::DramCache::Create(dram_options, specs, ssd_.get()));

  STRATA_RETURN_IF_ERROR(RestoreMeta(ssd_->CheckpointMeta()));
  planner_ = std::thread([this] { PlannerLoop(); });
  cleaner_ = std::thread([this] { CleanerLoop(); });
  STRATA_LOG_INFO("store %s open: %zu tables, T0 %s, %llu device rows, %llu DRAM rows",
                  options_.dir.c_str(), tables_.size(),
                  runner_ == kernels::Runner::kGpu ? "GPU" : "host",
                  static_cast<unsigned long long>(options_.device_rows_max),
                  static_cast<unsigned long long>(options_.dram_rows_max));
  return Status::Ok();
}

// The SSD tier's Env: the default one, or a FaultEnv over it injecting the
// faults of options_.faults into every read and write of the SSD files.
Result<io::Env*> StoreImpl::MakeSsdEnv() {
  if (ssd_envs_.env != nullptr) return ssd_envs_.env;
  STRATA_ASSIGN_OR_RETURN(FaultSpec spec, ParseFaultSpec(options_.faults));
  if (!spec.active()) return io::Env::Default();
  if (options_.ssd_backend != SsdBackend::kNative) {
    return Status::InvalidArgument(
        "StoreOptions.faults: fault injection needs the native SSD "
        "backend (RocksDB does its own file access)");
  }
  fault_env_ = std::make_unique<io::FaultEnv>(io::Env::Default());
  fault_env_->SetSeed(spec.seed);
  for (io::FaultOp op : {io::FaultOp::kRead, io::FaultOp::kWrite}) {
    if (spec.eio_probability > 0) {
      STRATA_RETURN_IF_ERROR(fault_env_->AddRule(
          {.op = op, .error_number = EIO, .probability = spec.eio_probability}));
    }
    if (spec.delay_us > 0) {
      STRATA_RETURN_IF_ERROR(fault_env_->AddRule(
          {.op = op, .kind = io::FaultKind::kLatency, .latency_us = spec.delay_us}));
    }
  }
  if (spec.enospc_probability > 0) {
    STRATA_RETURN_IF_ERROR(fault_env_->AddRule({.op = io::FaultOp::kWrite,
                                                .error_number = ENOSPC,
                                                .probability = spec.enospc_probability}));
  }
  STRATA_LOG_WARN("store %s: injecting SSD faults '%s'", options_.dir.c_str(),
                  options_.faults.c_str());
  return static_cast<io::Env*>(fault_env_.get());
}

StoreImpl::~StoreImpl() {
  Status s = Close();
  if (!s.ok()) STRATA_LOG_ERROR("Store close in destructor: %s", s.ToString().c_str());
}

Status StoreImpl::CheckOpen() const {
  if (closed_.load(std::memory_order_acquire)) {
    return Status::FailedPrecondition("store " + options_.dir + " is closed");
  }
  return Status::Ok();
}

Status StoreImpl::CheckWorker(WorkerId worker) const {
  if (worker >= num_workers_.load(std::memory_order_acquire)) {
    return Status::InvalidArgument("worker " + std::to_string(worker) + " is not registered");
  }
  return Status::Ok();
}

Status StoreImpl::CheckTable(TableId table) const {
  if (table >= tables_.size()) {
    return Status::InvalidArgument("table id " + std::to_string(table) + " unknown (" +
                                   std::to_string(tables_.size()) + " tables)");
  }
  return Status::Ok();
}

Status StoreImpl::CheckBatch(std::span<const Key> keys, const void* data, const char* what) const {
  if (keys.size() > kBatchKeysMax) {
    return Status::InvalidArgument(std::string(what) + ": " + std::to_string(keys.size()) +
                                   " keys, at most " + std::to_string(kBatchKeysMax));
  }
  if (!keys.empty() && keys.data() == nullptr) {
    return Status::InvalidArgument(std::string(what) + ": keys is null");
  }
  if (!keys.empty() && data == nullptr) {
    return Status::InvalidArgument(std::string(what) + ": output/gradient buffer is null");
  }
  return Status::Ok();
}

Result<WorkerId> StoreImpl::RegisterWorker(int device) {
  STRATA_RETURN_IF_ERROR(CheckOpen());
  base::MutexLock lock(&register_mu_);
  uint32_t id = num_workers_.load(std::memory_order_relaxed);
  if (id >= kWorkersMax) {
    return Status::ResourceExhausted("RegisterWorker: at most " + std::to_string(kWorkersMax) +
                                     " workers");
  }
  auto worker = std::make_unique<Worker>();
  worker->device = device;
  if (id < restored_clocks_.size()) worker->clock.store(restored_clocks_[id]);
  worker->estimator = std::make_unique<RateEstimator>(
      options_.timing_alpha, options_.timing_quantile, options_.timing_lambda0);
  workers_[id] = std::move(worker);
  num_workers_.store(id + 1, std::memory_order_release);
  return WorkerId{id};
}

Result<Clock> StoreImpl::CurrentClock(WorkerId worker) const {
  STRATA_RETURN_IF_ERROR(CheckWorker(worker));
  return workers_[worker]->clock.load(std::memory_order_acquire);
}

Result<TableId> StoreImpl::FindTable(const std::string& name) const {
  for (const auto& t : tables_) {
    if (t->name == name) return t->id;
  }
  return Status::NotFound("no table named '" + name + "' in store " + options_.dir);
}

// Meta: "strata-meta 1", one line per table (name dim optimizer row_bytes),
// then the workers' clocks.
std::vector<std::byte> StoreImpl::EncodeMeta() const {
  std::ostringstream out;
  out << "strata-meta " << kMetaVersion << "\n";
  out << "tables " << tables_.size() << "\n";
  for (const auto& t : tables_) {
    out << "table " << t->name << " " << t->dim << " "
        << static_cast<int>(table_options_[t->id].optimizer.kind) << " " << t->row_bytes << "\n";
  }
  uint32_t n = num_workers_.load(std::memory_order_acquire);
  out << "workers " << n << "\n";
  for (uint32_t w = 0; w < n; ++w) out << "clock " << workers_[w]->clock.load() << "\n";
  std::string text = out.str();
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

Status StoreImpl::RestoreMeta(std::span<const std::byte> meta) {
  if (meta.empty()) return Status::Ok();  // a new directory
  std::string text(reinterpret_cast<const char*>(meta.data()), meta.size());
  std::istringstream in(text);
  auto corrupt = [&](const std::string& what) {
    return Status::Corruption("checkpoint meta of " + options_.dir + ": " + what);
  };
  std::string word;
  int version = 0;
  size_t num_tables = 0;
  if (!(in >> word >> version) || word != "strata-meta") return corrupt("bad header");
  if (version != kMetaVersion) {
    return corrupt("version " + std::to_string(version) + ", this build reads " +
                   std::to_string(kMetaVersion));
  }
  if (!(in >> word >> num_tables) || word != "tables") return corrupt("no table count");
  if (num_tables != tables_.size()) {
    return Status::InvalidArgument("store " + options_.dir + " holds " +
                                   std::to_string(num_tables) + " tables, Open was given " +
                                   std::to_string(tables_.size()));
  }
  for (size_t i = 0; i < num_tables; ++i) {
    std::string name;
    uint32_t dim = 0, row_bytes = 0;
    int optimizer = 0;
    if (!(in >> word >> name >> dim >> optimizer >> row_bytes) || word != "table") {
      return corrupt("table line " + std::to_string(i));
    }
    const Table& t = *tables_[i];
    if (name != t.name || dim != t.dim || row_bytes != t.row_bytes ||
        optimizer != static_cast<int>(table_options_[i].optimizer.kind)) {
      return Status::InvalidArgument(
          "table " + std::to_string(i) + " of store " + options_.dir + " is '" + name + "' dim " +
          std::to_string(dim) + " optimizer " + std::to_string(optimizer) + "; Open was given '" +
          t.name + "' dim " + std::to_string(t.dim) + " optimizer " +
          std::to_string(static_cast<int>(table_options_[i].optimizer.kind)));
    }
  }
  size_t num_workers = 0;
  if (!(in >> word >> num_workers) || word != "workers" || num_workers > kWorkersMax) {
    return corrupt("worker count");
  }
  base::MutexLock lock(&register_mu_);
  restored_clocks_.clear();
  for (size_t w = 0; w < num_workers; ++w) {
    Clock clock = 0;
    if (!(in >> word >> clock) || word != "clock" || clock < 0) return corrupt("clock line");
    restored_clocks_.push_back(clock);
  }
  return Status::Ok();
}

Status StoreImpl::StopPlanner() {
  {
    base::MutexLock lock(&planner_mu_);
    planner_stop_ = true;
  }
  planner_cv_.SignalAll();
  if (planner_.joinable()) planner_.join();
  return Status::Ok();
}

Status StoreImpl::Close() {
  base::MutexLock close_lock(&close_mu_);
  // The first call stops new work; a call after a failed one (an I/O error
  // while writing dirty rows down) tries the write-back again, so a caller
  // that retries Close loses nothing.
  if (close_finished_) return Status::Ok();
  closed_.store(true, std::memory_order_release);
  STRATA_RETURN_IF_ERROR(StopPlanner());
  StopCleaner();
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
  close_finished_ = first.ok();
  return first.WithContext("Close(" + options_.dir + ")");
}

}  // namespace engine
}  // namespace strata
