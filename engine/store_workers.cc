// Workers and their clocks, tables by name, and the checkpoint meta that
// carries both across a restart: Checkpoint stores EncodeMeta's text with the
// rows; Open checks the tables against it and restores the clocks, which
// RegisterWorker hands to the workers in registration order.
#include <cstring>
#include <sstream>

#include "engine/store_impl.h"

namespace strata::engine {

Result<WorkerId> StoreImpl::RegisterWorker(int device) {
  STRATA_RETURN_IF_ERROR(CheckOpen());
  base::MutexLock lock(&workers_.register_mu);
  uint32_t id = workers_.count.load(std::memory_order_relaxed);
  if (id >= kWorkersMax) {
    return Status::ResourceExhausted("RegisterWorker: at most " + std::to_string(kWorkersMax) +
                                     " workers");
  }
  auto worker = std::make_unique<Worker>();
  worker->device = device;
  if (id < workers_.restored_clocks.size()) worker->clock.store(workers_.restored_clocks[id]);
  worker->estimator = std::make_unique<RateEstimator>(
      options_.timing_alpha, options_.timing_quantile, options_.timing_lambda0);
  workers_.slots[id] = std::move(worker);
  workers_.count.store(id + 1, std::memory_order_release);
  return WorkerId{id};
}

Result<Clock> StoreImpl::CurrentClock(WorkerId worker) const {
  STRATA_RETURN_IF_ERROR(CheckOpen());
  STRATA_RETURN_IF_ERROR(CheckWorker(worker));
  return workers_.slots[worker]->clock.load(std::memory_order_acquire);
}

Status StoreImpl::AdvanceClock(WorkerId worker) {
  STRATA_RETURN_IF_ERROR(CheckOpen());
  if (worker >= workers_.count.load(std::memory_order_acquire)) return CheckWorker(worker);
  // The worker moved on: a Push of it that failed part-way is not retried.
  ForgetPartialPush(*workers_.slots[worker]);
  workers_.slots[worker]->clock.fetch_add(1, std::memory_order_acq_rel);
  return Status::Ok();
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
  uint32_t n = workers_.count.load(std::memory_order_acquire);
  out << "workers " << n << "\n";
  for (uint32_t w = 0; w < n; ++w) out << "clock " << workers_.slots[w]->clock.load() << "\n";
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
  base::MutexLock lock(&workers_.register_mu);
  workers_.restored_clocks.clear();
  for (size_t w = 0; w < num_workers; ++w) {
    Clock clock = 0;
    if (!(in >> word >> clock) || word != "clock" || clock < 0) return corrupt("clock line");
    workers_.restored_clocks.push_back(clock);
  }
  return Status::Ok();
}

}  // namespace strata::engine
