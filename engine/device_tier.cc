#include "engine/device_tier.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "engine/limits.h"
#include "kernels/thread_pool.h"

namespace strata::engine {
namespace {

// Staging copies above this size go in pieces of it (DeviceTier::Send), each
// piece split among the pool's threads in grains of kStageGrainBytes.
constexpr size_t kStagePieceBytes = size_t{2} << 20;
constexpr uint64_t kStageGrainBytes = uint64_t{256} << 10;

}  // namespace

DeviceTier::DeviceTier(std::unique_ptr<kernels::DeviceTable> table)
    : table_(std::move(table)),
      runner_(table_->runner()),
      row_floats_(table_->row_floats()),
      dim_(table_->dim()) {}

Status DeviceTier::StageKeys(std::span<const Key> keys, void* stream) {
  STRATA_RETURN_IF_ERROR(ReserveRunner(staging_.keys, runner_, keys.size()));
  return kernels::RunnerCopyIn(runner_, staging_.keys.data(), keys.data(), keys.size_bytes(),
                               stream);
}

Status DeviceTier::ReservePass(size_t n, bool with_next_use, bool with_out_rows) {
  STRATA_RETURN_IF_ERROR(ReserveRunner(staging_.flags, runner_, n));
  if (runner_ == kernels::Runner::kHost) return Status::Ok();
  STRATA_RETURN_IF_ERROR(ReserveRunner(staging_.keys, runner_, n));
  STRATA_RETURN_IF_ERROR(pinned_keys_.Reserve(runner_, n));
  if (with_next_use) {
    STRATA_RETURN_IF_ERROR(ReserveRunner(staging_.next_use, runner_, n));
    STRATA_RETURN_IF_ERROR(pinned_next_use_.Reserve(runner_, n));
  }
  if (with_out_rows) {
    STRATA_RETURN_IF_ERROR(ReserveRunner(staging_.out_rows, runner_, n));
    STRATA_RETURN_IF_ERROR(pinned_out_rows_.Reserve(runner_, n));
  }
  return Status::Ok();
}

template <class T>
Result<const T*> DeviceTier::Send(kernels::RunnerBuffer<T>& buffer, kernels::HostStaging<T>& pinned,
                                  const T* data, size_t count, void* stream) {
  if (runner_ == kernels::Runner::kHost) return data;
  if (buffer.size() < count || pinned.size() < count) {
    return Status::Internal("DeviceTier: staging of " + std::to_string(count) +
                            " elements used before ReservePass grew it");
  }
  const size_t bytes = count * sizeof(T);
  const auto* src = reinterpret_cast<const char*>(data);
  auto* page_locked = reinterpret_cast<char*>(pinned.data());
  auto* dst = reinterpret_cast<char*>(buffer.data());
  if (bytes <= kStagePieceBytes) {
    if (bytes > 0) std::memcpy(page_locked, src, bytes);
    STRATA_RETURN_IF_ERROR(kernels::RunnerCopyIn(runner_, dst, page_locked, bytes, stream));
    return static_cast<const T*>(buffer.data());
  }
  // A large batch goes in pieces: the copy of piece k to the device is queued
  // before piece k + 1 is copied into page-locked memory (by several threads),
  // so the host copy and the transfer overlap. The pieces are disjoint parts
  // of `pinned`, which no other copy of this call touches.
  for (size_t off = 0; off < bytes; off += kStagePieceBytes) {
    const size_t len = std::min(kStagePieceBytes, bytes - off);
    kernels::ThreadPool::Shared().ParallelFor(
        len, kStageGrainBytes, 0, [&](uint64_t begin, uint64_t end) {
          std::memcpy(page_locked + off + begin, src + off + begin, end - begin);
        });
    STRATA_RETURN_IF_ERROR(
        kernels::RunnerCopyIn(runner_, dst + off, page_locked + off, len, stream));
  }
  return static_cast<const T*>(buffer.data());
}

Result<const Key*> DeviceTier::SendKeys(std::span<const Key> keys, void* stream) {
  return Send(staging_.keys, pinned_keys_, keys.data(), keys.size(), stream);
}

Status DeviceTier::Settle(Status status, void* stream) {
  if (!status.ok() && runner_ == kernels::Runner::kGpu) {
    // Best effort: the first error is the one reported.
    Status synced = kernels::RunnerSync(runner_, stream);
    static_cast<void>(synced);
  }
  return status;
}

Result<const uint8_t*> DeviceTier::FoundOnHost(size_t n) {
  if (runner_ == kernels::Runner::kHost) return static_cast<const uint8_t*>(staging_.flags.data());
  scratch_.found.resize(n);
  STRATA_RETURN_IF_ERROR(
      kernels::RunnerCopyOut(runner_, scratch_.found.data(), staging_.flags.data(), n));
  return static_cast<const uint8_t*>(scratch_.found.data());
}

Status DeviceTier::Touch(std::span<const Key> keys, std::span<const int64_t> next_use,
                         int64_t next_use_all, float* out, void* stream, uint64_t* missing) {
  STRATA_RETURN_IF_ERROR(ReservePass(keys.size(), !next_use.empty(), /*with_out_rows=*/false));
  return Settle(
      [&]() -> Status {
        kernels::TouchBatch batch;
        STRATA_ASSIGN_OR_RETURN(batch.keys, SendKeys(keys, stream));
        batch.n = keys.size();
        batch.out = out;
        batch.next_use_all = next_use_all;
        if (!next_use.empty()) {
          STRATA_ASSIGN_OR_RETURN(batch.next_use, Send(staging_.next_use, pinned_next_use_,
                                                       next_use.data(), keys.size(), stream));
        }
        batch.found = staging_.flags.data();
        return table_->FindTouch(batch, missing, stream);
      }(),
      stream);
}

Status DeviceTier::CollectMisses(std::span<const Key> keys, std::span<const int64_t> next_use,
                                 int64_t next_use_all) {
  PassScratch& sc = scratch_;
  const uint8_t* found = nullptr;
  STRATA_ASSIGN_OR_RETURN(found, FoundOnHost(keys.size()));
  sc.miss_keys.clear();
  sc.miss_rows.clear();
  sc.miss_next_use.clear();
  sc.next_use_all = next_use_all;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (found[i]) continue;
    sc.miss_keys.push_back(keys[i]);
    sc.miss_rows.push_back(static_cast<uint32_t>(i));
    if (!next_use.empty()) sc.miss_next_use.push_back(next_use[i]);
  }
  sc.dedup.Distinct(sc.miss_keys, &sc.miss_unique);
  return Status::Ok();
}

Status DeviceTier::TouchMisses(float* out, void* stream, uint64_t* still_missing) {
  PassScratch& sc = scratch_;
  const size_t m = sc.miss_keys.size();
  STRATA_RETURN_IF_ERROR(ReservePass(m, !sc.miss_next_use.empty(), /*with_out_rows=*/true));
  return Settle(
      [&]() -> Status {
        kernels::TouchBatch batch;
        STRATA_ASSIGN_OR_RETURN(batch.keys, SendKeys(sc.miss_keys, stream));
        batch.n = m;
        batch.out = out;
        STRATA_ASSIGN_OR_RETURN(batch.out_rows, Send(staging_.out_rows, pinned_out_rows_,
                                                     sc.miss_rows.data(), m, stream));
        batch.next_use_all = sc.next_use_all;
        if (!sc.miss_next_use.empty()) {
          STRATA_ASSIGN_OR_RETURN(batch.next_use, Send(staging_.next_use, pinned_next_use_,
                                                       sc.miss_next_use.data(), m, stream));
        }
        batch.found = staging_.flags.data();
        return table_->FindTouch(batch, still_missing, stream);
      }(),
      stream);
}

Status DeviceTier::Push(std::span<const Key> keys, const float* grads, void* stream) {
  STRATA_RETURN_IF_ERROR(ReservePass(keys.size(), false, false));
  return Settle(
      [&]() -> Status {
        const Key* runner_keys = nullptr;
        STRATA_ASSIGN_OR_RETURN(runner_keys, SendKeys(keys, stream));
        STRATA_RETURN_IF_ERROR(table_->PushAsync(runner_keys, keys.size(), grads, stream));
        return table_->Synchronize(stream);
      }(),
      stream);
}

Status DeviceTier::FindPresence(std::span<const Key> keys) {
  STRATA_RETURN_IF_ERROR(ReservePass(keys.size(), false, false));
  return Settle(
      [&]() -> Status {
        const Key* runner_keys = nullptr;
        STRATA_ASSIGN_OR_RETURN(runner_keys, SendKeys(keys, nullptr));
        return table_->Find(runner_keys, keys.size(), nullptr, staging_.flags.data());
      }(),
      nullptr);
}

Status DeviceTier::Presence(std::span<const Key> keys, std::vector<uint8_t>* found) {
  found->resize(keys.size());
  for (size_t off = 0; off < keys.size(); off += kChunkKeysMax) {
    const size_t n = std::min<size_t>(kChunkKeysMax, keys.size() - off);
    STRATA_RETURN_IF_ERROR(FindPresence(keys.subspan(off, n)));
    STRATA_RETURN_IF_ERROR(
        kernels::RunnerCopyOut(runner_, found->data() + off, staging_.flags.data(), n));
  }
  return Status::Ok();
}

Status DeviceTier::Pin(std::span<const Key> keys, bool pin) {
  Status first = Status::Ok();
  for (size_t off = 0; off < keys.size(); off += kChunkKeysMax) {
    const size_t n = std::min<size_t>(kChunkKeysMax, keys.size() - off);
    Status done = StageKeys(keys.subspan(off, n));
    if (done.ok() && pin) done = ReserveRunner(staging_.flags, runner_, n);
    if (done.ok()) {
      done = pin ? table_->Pin(staging_.keys.data(), n, staging_.flags.data())
                 : table_->Unpin(staging_.keys.data(), n);
    }
    if (done.ok()) continue;
    if (pin) {
      // No pin outlives a failed call: the chunks already pinned are unpinned.
      Status undone = Pin(keys.first(off), false);
      static_cast<void>(undone);
      return done;
    }
    // Unpinning goes on past a failed chunk; the first error is returned.
    if (first.ok()) first = done;
  }
  return first;
}

Status DeviceTier::Insert(std::span<const Key> keys, const float* rows, const int64_t* next_use,
                          const uint8_t* dirty) {
  RunnerStaging& st = staging_;
  for (size_t off = 0; off < keys.size(); off += kChunkKeysMax) {
    const size_t n = std::min<size_t>(kChunkKeysMax, keys.size() - off);
    STRATA_RETURN_IF_ERROR(StageKeys(keys.subspan(off, n)));
    STRATA_RETURN_IF_ERROR(ReserveRunner(st.rows, runner_, n * row_floats_));
    STRATA_RETURN_IF_ERROR(ReserveRunner(st.next_use, runner_, n));
    STRATA_RETURN_IF_ERROR(ReserveRunner(st.dirty, runner_, n));
    STRATA_RETURN_IF_ERROR(kernels::RunnerCopyIn(runner_, st.rows.data(), rows + off * row_floats_,
                                                 n * row_floats_ * sizeof(float)));
    STRATA_RETURN_IF_ERROR(
        kernels::RunnerCopyIn(runner_, st.next_use.data(), next_use + off, n * sizeof(int64_t)));
    STRATA_RETURN_IF_ERROR(kernels::RunnerCopyIn(runner_, st.dirty.data(), dirty + off, n));
    STRATA_RETURN_IF_ERROR(table_->InsertOrAssign(st.keys.data(), n, st.rows.data(),
                                                  st.next_use.data(), st.dirty.data()));
  }
  return Status::Ok();
}

Status DeviceTier::SetNextUse(std::span<const Key> keys, std::span<const int64_t> next_use) {
  for (size_t off = 0; off < keys.size(); off += kChunkKeysMax) {
    const size_t n = std::min<size_t>(kChunkKeysMax, keys.size() - off);
    STRATA_RETURN_IF_ERROR(StageKeys(keys.subspan(off, n)));
    STRATA_RETURN_IF_ERROR(ReserveRunner(staging_.next_use, runner_, n));
    STRATA_RETURN_IF_ERROR(kernels::RunnerCopyIn(runner_, staging_.next_use.data(),
                                                 next_use.data() + off, n * sizeof(int64_t)));
    STRATA_RETURN_IF_ERROR(table_->SetNextUse(staging_.keys.data(), n, staging_.next_use.data()));
  }
  return Status::Ok();
}

Status DeviceTier::Evict(uint64_t count, HostRows* out) {
  RunnerStaging& st = staging_;
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.keys, runner_, count));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.rows, runner_, count * row_floats_));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.next_use, runner_, count));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.dirty, runner_, count));
  kernels::RowBatch batch{st.keys.data(), st.rows.data(), st.next_use.data(), st.dirty.data(), 0};
  STRATA_RETURN_IF_ERROR(table_->EvictCandidates(count, &batch));
  return CopyRowsToHost(runner_, batch, row_floats_, out);
}

Status DeviceTier::LargestNextUses(uint64_t count, std::vector<int64_t>* out) {
  out->resize(count);
  uint64_t n = 0;
  STRATA_RETURN_IF_ERROR(table_->LargestNextUses(count, out->data(), &n));
  out->resize(n);
  return Status::Ok();
}

Status DeviceTier::Gather(std::span<const Key> keys, float* values, std::vector<uint8_t>* found) {
  RunnerStaging& st = staging_;
  const size_t n = keys.size();
  STRATA_RETURN_IF_ERROR(StageKeys(keys));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.values, runner_, n * dim_));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.flags, runner_, n));
  STRATA_RETURN_IF_ERROR(table_->Find(st.keys.data(), n, st.values.data(), st.flags.data()));
  found->resize(n);
  STRATA_RETURN_IF_ERROR(kernels::RunnerCopyOut(runner_, found->data(), st.flags.data(), n));
  return kernels::RunnerCopyOut(runner_, values, st.values.data(), n * dim_ * sizeof(float));
}

Status DeviceTier::PushHost(std::span<const Key> keys, const float* grads) {
  RunnerStaging& st = staging_;
  const size_t n = keys.size();
  STRATA_RETURN_IF_ERROR(StageKeys(keys));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.values, runner_, n * dim_));
  STRATA_RETURN_IF_ERROR(
      kernels::RunnerCopyIn(runner_, st.values.data(), grads, n * dim_ * sizeof(float)));
  return table_->Push(st.keys.data(), n, st.values.data());
}

Status DeviceTier::ExportAll(const std::function<Status(const HostRows&)>& fn) {
  HostRows chunk;
  return table_->ExportAll([&](const kernels::RowBatch& batch) -> Status {
    STRATA_RETURN_IF_ERROR(CopyRowsToHost(runner_, batch, row_floats_, &chunk));
    return fn(chunk);
  });
}

}  // namespace strata::engine
