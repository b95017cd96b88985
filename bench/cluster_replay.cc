// The cluster replay (cluster_replay.h): one thread per rank drives the
// collective calls step by step.
#include "bench/cluster_replay.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "bench/row_export.h"
#include "bench/verify_model.h"
#include "strata/cluster_owner.h"
#include "strata/trace.h"

namespace strata::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Retries of a collective call that failed with IOError or ResourceExhausted
// on every rank (ReplayOptions::attempts_max in all), the wait between two
// doubling from kBackoffMin to kBackoffMax; every rank sees the same
// outcome of every attempt, so all retry together.
constexpr auto kBackoffMin = std::chrono::microseconds(50);
constexpr auto kBackoffMax = std::chrono::milliseconds(10);
// Keys per collective Pull of the final check under injected faults.
constexpr size_t kFinalPullKeys = 4096;
// A shared initial value: table (u32), key (u64), then dim floats.
constexpr size_t kInitHeadBytes = sizeof(uint32_t) + sizeof(Key);

bool Retryable(const Status& s) { return s.IsIOError() || s.IsResourceExhausted(); }

// The keys of `table` in `batch` (none when the batch does not name it).
std::span<const Key> KeysOf(const trace::TraceBatch& batch, TableId table) {
  for (const auto& t : batch.tables) {
    if (t.table == table) return t.keys;
  }
  return {};
}

// Every rank's bytes, in rank order, on every rank.
Status AllGatherBytes(MPI_Comm comm, const std::string& mine, std::vector<std::string>* all) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(size);
  std::vector<int> displs(size, 0);
  if (MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm) != MPI_SUCCESS) {
    return Status::Unavailable("cluster replay: MPI_Allgather failed");
  }
  for (int r = 1; r < size; ++r) displs[r] = displs[r - 1] + lens[r - 1];
  std::string bytes(static_cast<size_t>(displs[size - 1]) + lens[size - 1], '\0');
  if (MPI_Allgatherv(mine.data(), len, MPI_BYTE, bytes.data(), lens.data(), displs.data(), MPI_BYTE,
                     comm) != MPI_SUCCESS) {
    return Status::Unavailable("cluster replay: MPI_Allgatherv failed");
  }
  all->resize(size);
  for (int r = 0; r < size; ++r) (*all)[r] = bytes.substr(displs[r], lens[r]);
  return Status::Ok();
}

// Reads a trace a step at a time: the R batches of step s, one per rank
// (empty past the trace's end or the replay's batch limit).
class StepReader {
 public:
  static Result<StepReader> Open(const std::string& path, int ranks, uint64_t batches_total) {
    STRATA_ASSIGN_OR_RETURN(auto reader, trace::TraceReader::Open(path));
    return StepReader(std::move(reader), ranks, batches_total);
  }
  Status Next(std::vector<trace::TraceBatch>* step) {
    step->assign(ranks_, trace::TraceBatch{});
    for (int r = 0; r < ranks_ && read_ < batches_total_; ++r, ++read_) {
      STRATA_ASSIGN_OR_RETURN(bool more, reader_->Next(&(*step)[r]));
      if (!more) {
        return Status::Corruption("cluster replay: " + std::to_string(read_) +
                                  " batches in the trace, " + std::to_string(batches_total_) +
                                  " expected");
      }
    }
    return Status::Ok();
  }

 private:
  StepReader(std::unique_ptr<trace::TraceReader> reader, int ranks, uint64_t batches_total)
      : reader_(std::move(reader)), ranks_(ranks), batches_total_(batches_total) {}
  std::unique_ptr<trace::TraceReader> reader_;
  int ranks_;
  uint64_t batches_total_;
  uint64_t read_ = 0;
};

class ClusterReplay {
 public:
  ClusterReplay(const ReplayOptions& o, ReplayPlan& plan, Cluster& cluster, MPI_Comm comm)
      : o_(o),
        plan_(plan),
        cluster_(cluster),
        comm_(comm),
        rank_(cluster.rank()),
        ranks_(cluster.world_size()),
        workers_(plan.workers),
        model_(plan.model.get()) {
    steps_ = (plan.batches_total + ranks_ - 1) / ranks_;
  }

  Result<ClusterReplayReport> Run();

 private:
  template <typename Fn>
  Status Retried(Fn&& fn, const std::string& what) {
    auto backoff = std::chrono::microseconds(kBackoffMin);
    Status s = Status::Internal("cluster replay: no attempt");
    for (uint32_t i = 0; i < o_.attempts_max; ++i) {
      if (i > 0) {
        std::this_thread::sleep_for(backoff);
        backoff = std::min<std::chrono::microseconds>(2 * backoff, kBackoffMax);
      }
      s = fn();
      if (s.ok() || !Retryable(s)) return s;
      ++retries_;
    }
    return s.WithContext(what + ": gave up after " + std::to_string(o_.attempts_max) + " attempts");
  }

  // Signals this rank's batch of step s (read by `ahead_`) as an intent.
  Status SignalIntents(uint64_t s);
  // Pulls, pushes and advances one step; verification failures go to
  // *verify (agreed at the end of the step), and the initial values this
  // rank recorded to *inits.
  Status Step(uint64_t s, Status* verify, std::string* inits);
  // Shares the recorded initial values with every rank.
  Status ShareInits(const std::string& mine);
  // Checks every row this rank owns against the model.
  Status CheckFinal(uint64_t* rows);

  bool Mine(TableId table, Key key) const {
    return ClusterOwner(table, key, static_cast<uint32_t>(ranks_)) == static_cast<uint32_t>(rank_);
  }

  const ReplayOptions& o_;
  ReplayPlan& plan_;
  Cluster& cluster_;
  MPI_Comm comm_;
  const int rank_;
  const int ranks_;
  const uint32_t workers_;
  VerifyModel* model_;
  uint64_t steps_ = 0;
  std::vector<WorkerId> ids_;
  std::optional<StepReader> now_, ahead_;
  std::vector<trace::TraceBatch> batches_, ahead_batches_;
  std::vector<float> rows_;
  std::vector<std::vector<float>> grads_;
  std::vector<uint32_t> started_, recorded_;
  std::vector<Key> unique_;
  uint64_t retries_ = 0;
  uint64_t pulls_ = 0;
  uint64_t batches_done_ = 0;
};

Status ClusterReplay::SignalIntents(uint64_t s) {
  STRATA_RETURN_IF_ERROR(ahead_->Next(&ahead_batches_));
  const WorkerId w = ids_[s % workers_];
  const Clock clock = static_cast<Clock>(s / workers_);
  for (const auto& t : ahead_batches_[rank_].tables) {
    unique_.assign(t.keys.begin(), t.keys.end());
    std::sort(unique_.begin(), unique_.end());
    unique_.erase(std::unique(unique_.begin(), unique_.end()), unique_.end());
    STRATA_RETURN_IF_ERROR(cluster_.Intent(w, t.table, unique_, clock, clock + 1));
  }
  return Status::Ok();
}

Status ClusterReplay::Step(uint64_t s, Status* verify, std::string* inits) {
  const uint32_t wi = static_cast<uint32_t>(s % workers_);
  const WorkerId w = ids_[wi];
  const uint64_t clock = s / workers_;
  const uint32_t dim = o_.dim;
  const auto step_start = SteadyClock::now();
  STRATA_RETURN_IF_ERROR(now_->Next(&batches_));
  const trace::TraceBatch& mine = batches_[rank_];
  const auto context = [&] { return "replay --cluster: step " + std::to_string(s); };
  grads_.resize(plan_.tables.size());
  for (TableId t = 0; t < plan_.tables.size(); ++t) {
    const std::span<const Key> keys = KeysOf(mine, t);
    rows_.resize(std::max<size_t>(1, keys.size()) * dim);
    grads_[t].resize(std::max<size_t>(1, keys.size()) * dim);
    STRATA_RETURN_IF_ERROR(Retried([&] { return cluster_.Pull(w, t, keys, rows_.data()); }, "Pull")
                               .WithContext(context()));
    pulls_ += keys.size();
    if (model_ != nullptr) {
      model_->ReadStarted(t, keys, &started_);
      if (verify->ok()) {
        *verify = model_->CheckPull(wi, clock, t, keys, rows_.data(), started_, &recorded_);
      }
      for (uint32_t i : recorded_) {
        inits->append(reinterpret_cast<const char*>(&t), sizeof(uint32_t));
        inits->append(reinterpret_cast<const char*>(&keys[i]), sizeof(Key));
        inits->append(reinterpret_cast<const char*>(rows_.data() + uint64_t{i} * dim),
                      dim * sizeof(float));
      }
      recorded_.clear();
      model_->Gradients(t, keys, grads_[t].data());
    } else {
      for (size_t j = 0; j < keys.size() * dim; ++j) grads_[t][j] = 0.01f * rows_[j] + 1e-4f;
    }
  }
  if (o_.compute_us > 0) {
    std::this_thread::sleep_until(step_start + std::chrono::microseconds(o_.compute_us));
  }
  for (TableId t = 0; t < plan_.tables.size(); ++t) {
    const std::span<const Key> keys = KeysOf(mine, t);
    if (model_ != nullptr) {
      for (const auto& b : batches_) model_->BeforePush(t, KeysOf(b, t));
    }
    STRATA_RETURN_IF_ERROR(
        Retried([&] { return cluster_.Push(w, t, keys, grads_[t].data()); }, "Push")
            .WithContext(context()));
    if (model_ != nullptr) {
      for (const auto& b : batches_) model_->AfterPush(wi, t, KeysOf(b, t));
    }
  }
  if (s * ranks_ + rank_ < plan_.batches_total) ++batches_done_;
  // The intent of this rank's batch `lookahead` clocks of w ahead, delivered
  // by this step's AdvanceClock.
  Status signalled = Status::Ok();
  if (o_.intents && s + o_.lookahead * workers_ < steps_) {
    signalled = SignalIntents(s + o_.lookahead * workers_).WithContext(context());
  }
  if (verify->ok() && !signalled.ok()) *verify = signalled;
  return Retried([&] { return cluster_.AdvanceClock(w); }, "AdvanceClock").WithContext(context());
}

Status ClusterReplay::ShareInits(const std::string& mine) {
  std::vector<std::string> all;
  STRATA_RETURN_IF_ERROR(AllGatherBytes(comm_, mine, &all));
  const size_t record = kInitHeadBytes + o_.dim * sizeof(float);
  std::vector<float> row(o_.dim);
  for (const std::string& bytes : all) {
    for (size_t at = 0; at + record <= bytes.size(); at += record) {
      uint32_t table = 0;
      Key key = 0;
      std::memcpy(&table, bytes.data() + at, sizeof(table));
      std::memcpy(&key, bytes.data() + at + sizeof(table), sizeof(key));
      std::memcpy(row.data(), bytes.data() + at + kInitHeadBytes, o_.dim * sizeof(float));
      STRATA_RETURN_IF_ERROR(model_->ShareInit(table, key, row));
    }
  }
  return Status::Ok();
}

Status ClusterReplay::CheckFinal(uint64_t* rows) {
  *rows = 0;
  for (TableId t = 0; t < plan_.tables.size(); ++t) {
    if (!o_.faults.enabled()) {
      // This rank's shard holds exactly the rows it owns: scan it (local).
      uint64_t table_rows = 0;
      STRATA_RETURN_IF_ERROR(Retried(
          [&] {
            table_rows = 0;
            model_->ForgetSeen(t);
            return cluster_.shard().ScanTable(t, [&](Key key, std::span<const float> row) {
              ++table_rows;
              if (!Mine(t, key)) {
                return Status::Corruption("replay --cluster: rank " + std::to_string(rank_) +
                                          "'s shard holds key " + std::to_string(key) +
                                          " of table " + plan_.tables[t].name +
                                          ", which another rank owns");
              }
              return model_->CheckFinal(t, key, row);
            });
          },
          "ScanTable of table " + plan_.tables[t].name));
      *rows += table_rows;
      continue;
    }
    // Under injected faults: collective pulls of the keys this rank owns,
    // in as many calls on every rank.
    std::vector<Key> keys = model_->Keys(t);
    keys.erase(std::remove_if(keys.begin(), keys.end(), [&](Key k) { return !Mine(t, k); }),
               keys.end());
    uint64_t calls = (keys.size() + kFinalPullKeys - 1) / kFinalPullKeys;
    uint64_t calls_max = 0;
    if (MPI_Allreduce(&calls, &calls_max, 1, MPI_UINT64_T, MPI_MAX, comm_) != MPI_SUCCESS) {
      return Status::Unavailable("replay --cluster: MPI_Allreduce failed");
    }
    std::vector<float> out(kFinalPullKeys * o_.dim);
    Status local = Status::Ok();
    for (uint64_t c = 0; c < calls_max; ++c) {
      const size_t off = std::min(keys.size(), c * kFinalPullKeys);
      const std::span<const Key> chunk(keys.data() + off,
                                       std::min(kFinalPullKeys, keys.size() - off));
      STRATA_RETURN_IF_ERROR(
          Retried([&] { return cluster_.Pull(ids_[0], t, chunk, out.data()); }, "final Pull"));
      for (size_t i = 0; i < chunk.size() && local.ok(); ++i) {
        local = model_->CheckFinal(t, chunk[i], std::span<const float>(&out[i * o_.dim], o_.dim));
      }
      *rows += chunk.size();
    }
    STRATA_RETURN_IF_ERROR(cluster_.AgreeOn(local));
  }
  return model_->CheckAllSeen([&](TableId t, Key k) { return Mine(t, k); });
}

Result<ClusterReplayReport> ClusterReplay::Run() {
  for (uint32_t w = 0; w < workers_; ++w) {
    STRATA_ASSIGN_OR_RETURN(WorkerId id, cluster_.RegisterWorker());
    ids_.push_back(id);
  }
  Status local = Status::Ok();
  {
    Result<StepReader> now = StepReader::Open(o_.trace, ranks_, plan_.batches_total);
    Result<StepReader> ahead = StepReader::Open(o_.trace, ranks_, plan_.batches_total);
    if (!now.ok()) local = now.status();
    if (!ahead.ok()) local = ahead.status();
    if (local.ok()) {
      now_.emplace(std::move(now).value());
      ahead_.emplace(std::move(ahead).value());
    }
  }
  // The first `lookahead` clocks of every worker, delivered before step 0.
  if (o_.intents) {
    for (uint64_t s = 0; s < std::min<uint64_t>(steps_, o_.lookahead * workers_) && local.ok();
         ++s) {
      local = SignalIntents(s);
    }
  }
  STRATA_RETURN_IF_ERROR(cluster_.AgreeOn(local.WithContext("replay --cluster")));
  STRATA_RETURN_IF_ERROR(cluster_.DrainIntents());
  const auto start = SteadyClock::now();
  Status verify = Status::Ok();
  std::string inits;
  for (uint64_t s = 0; s < steps_; ++s) {
    inits.clear();
    STRATA_RETURN_IF_ERROR(Step(s, &verify, &inits));
    STRATA_RETURN_IF_ERROR(cluster_.AgreeOn(verify));
    if (model_ != nullptr) STRATA_RETURN_IF_ERROR(cluster_.AgreeOn(ShareInits(inits)));
  }
  ClusterReplayRank me;
  me.elapsed_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - start).count());
  me.batches = batches_done_;
  me.pulls = pulls_;
  // The directory stays a cluster to reopen, reshard or export.
  STRATA_RETURN_IF_ERROR(
      Retried([&] { return cluster_.Checkpoint(); }, "Checkpoint").WithContext("replay --cluster"));
  if (model_ != nullptr) {
    STRATA_RETURN_IF_ERROR(cluster_.AgreeOn(
        CheckFinal(&me.scanned_rows).WithContext("replay --cluster: final check")));
    me.verified_rows = model_->checked_rows();
  }
  if (!o_.export_path.empty()) {
    uint64_t rows = 0;
    STRATA_RETURN_IF_ERROR(
        ExportClusterRows(cluster_, comm_, o_.export_path, o_.attempts_max, &rows));
  }
  const ClusterStats stats = cluster_.Stats();
  me.shard_pulls = stats.store.pulls;
  me.stall_pulls = stats.store.stall_pulls;
  me.keys_sent = stats.exchange.keys_sent;
  me.keys_served = stats.exchange.keys_served;
  me.bytes_sent = stats.exchange.bytes_sent;
  me.bytes_received = stats.exchange.bytes_received;
  me.intents_sent = stats.exchange.intents_sent;
  me.exchange_us = stats.exchange.exchange_us;
  me.ssd_row_reads = stats.store.ssd_row_reads;
  me.ssd_row_writes = stats.store.ssd_row_writes;
  me.t0_hits = stats.store.t0.hits;
  me.t1_hits = stats.store.t1.hits;
  me.retried_errors = retries_;

  std::vector<uint64_t> packed;
  me.ForEach([&](uint64_t* v) { packed.push_back(*v); });
  std::vector<uint64_t> all(packed.size() * ranks_);
  if (MPI_Allgather(packed.data(), static_cast<int>(packed.size()), MPI_UINT64_T, all.data(),
                    static_cast<int>(packed.size()), MPI_UINT64_T, comm_) != MPI_SUCCESS) {
    return Status::Unavailable("replay --cluster: MPI_Allgather of the reports failed");
  }
  ClusterReplayReport r;
  r.rank = rank_;
  r.world_size = ranks_;
  r.steps = steps_;
  r.batches_total = plan_.batches_total;
  r.ranks.resize(ranks_);
  size_t i = 0;
  for (ClusterReplayRank& rank : r.ranks) rank.ForEach([&](uint64_t* v) { *v = all[i++]; });
  for (ClusterReplayRank& rank : r.ranks) {
    std::vector<uint64_t> values;
    rank.ForEach([&](uint64_t* v) { values.push_back(*v); });
    size_t j = 0;
    r.summed.ForEach([&](uint64_t* v) { *v += values[j++]; });
  }
  r.summed.elapsed_us = 0;
  for (const ClusterReplayRank& rank : r.ranks) {
    r.summed.elapsed_us = std::max(r.summed.elapsed_us, rank.elapsed_us);
  }
  return r;
}

}  // namespace

Status ExportClusterRows(Cluster& cluster, MPI_Comm comm, const std::string& path,
                         uint32_t attempts, uint64_t* rows) {
  const uint32_t ranks = static_cast<uint32_t>(cluster.world_size());
  const uint32_t rank = static_cast<uint32_t>(cluster.rank());
  RowExport mine;
  Status local = Status::Ok();
  for (TableId t = 0; t < cluster.Tables().size() && local.ok(); ++t) {
    const size_t before = mine.size();
    for (uint32_t i = 0; i < std::max<uint32_t>(1, attempts); ++i) {
      mine.Truncate(before);  // a retried scan starts over
      local = cluster.shard().ScanTable(t, [&](Key key, std::span<const float> row) {
        if (ClusterOwner(t, key, ranks) != rank) {
          return Status::Corruption("rank " + std::to_string(rank) + "'s shard holds key " +
                                    std::to_string(key) + " of table '" + cluster.Tables()[t].name +
                                    "', which rank " + std::to_string(ClusterOwner(t, key, ranks)) +
                                    " owns");
        }
        mine.Add(t, key, row);
        return Status::Ok();
      });
      if (!Retryable(local)) break;
    }
  }
  *rows = mine.size();
  STRATA_RETURN_IF_ERROR(cluster.AgreeOn(local.WithContext("export of the cluster's rows")));
  std::vector<std::string> all;
  STRATA_RETURN_IF_ERROR(AllGatherBytes(comm, mine.Text(), &all));
  Status written = Status::Ok();
  if (rank == 0) {
    RowExport merged;
    for (const std::string& text : all) merged.AddText(text);
    written = merged.Write(path);
  }
  return cluster.AgreeOn(written);
}

Result<ClusterReplayReport> RunClusterReplay(const ReplayOptions& o, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // Every rank reads the same options and trace, so all agree here; a rank
  // that still failed alone exits non-zero and mpirun ends the others.
  STRATA_ASSIGN_OR_RETURN(ReplayPlan plan, PlanReplay(o, /*check_dir=*/true));
  ClusterOptions co;
  co.store = plan.store;
  co.store.use_gpu = false;  // the MPI form keeps T0 in host memory
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Cluster> cluster, Cluster::Open(co, plan.tables, comm));
  ClusterReplay replay(o, plan, *cluster, comm);
  Result<ClusterReplayReport> report = replay.Run();
  // A failed run closes too (every rank failed alike, so all are here).
  const Status closed = cluster->Close();
  if (!report.ok()) return report.status();
  STRATA_RETURN_IF_ERROR(closed);
  return report;
}

}  // namespace strata::bench
