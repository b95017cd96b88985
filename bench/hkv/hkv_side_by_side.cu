// strata_hkv_side_by_side: the T0 DeviceTable beside NVIDIA's
// HierarchicalKV (HKV) on the same GPU, the same keys and the same
// occupancy, in one process. Built only when the baseline's headers are
// given (-DSTRATA_HKV_DIR=<HierarchicalKV checkout>); nothing of HKV is part
// of the project.
//
//   strata_hkv_side_by_side [--slots 67108864] [--dim 8,32,64]
//                           [--load-factor 0.5,0.75,0.9] [--batch 1048576]
//                           [--hit-rate 0.6] [--reps 5] [--json FILE]
//
// For every (dim, load factor) each table is created with at least --slots
// slots (HKV: exactly, its capacity; ours: capacity_rows = slots * 0.85,
// which the table rounds up to whole buckets), filled (not timed) to
// load_factor * its own slots with the same keys, then each op is timed
// --reps times on batches of --batch keys: a --hit-rate fraction drawn
// uniformly from the resident keys, the rest keys never inserted (as HKV's
// own benchmark mixes 60% hits). Ops:
//   find              gather the embeddings (dim floats) of the batch
//   insert_or_assign  write the batch's rows (the new keys are inserted)
//   find_or_insert    find the batch, creating its new keys
// After an op that inserted, the new keys are erased (not timed), so the
// occupancy stays put. Ours runs with SGD, whose rows are the embedding
// alone (HKV stores no optimizer state). Time: the call on a stream plus
// the wait for that stream, on the host clock, the same for both; the
// median of the reps is reported in billions of keys per second, with
// ours / HKV.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <merlin_hashtable.cuh>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/device_table.h"
#include "kernels/limits.h"

namespace {

using strata::Key;
using strata::Status;
using strata::kernels::DeviceTable;

#define SBS_CUDA(call)                                                                \
  do {                                                                                \
    const cudaError_t e = (call);                                                     \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "strata_hkv_side_by_side: %s failed: %s (%s:%d)\n", #call, \
                   cudaGetErrorString(e), __FILE__, __LINE__);                        \
      std::exit(2);                                                                   \
    }                                                                                 \
  } while (0)

void Check(const Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "strata_hkv_side_by_side: %s: %s\n", what, s.ToString().c_str());
  std::exit(2);
}

struct Args {
  uint64_t slots = uint64_t{64} << 20;
  std::string dims = "8,32,64";
  std::string load_factors = "0.5,0.75,0.9";
  uint64_t batch = uint64_t{1} << 20;
  double hit_rate = 0.6;
  uint32_t reps = 5;
  std::string json;
};

constexpr const char* kOps[] = {"find", "insert_or_assign", "find_or_insert"};

Key KeyOfRank(uint64_t rank) { return rank * 0x9e3779b97f4a7c15ULL + 12345; }

template <typename T>
std::vector<T> SplitNumbers(const std::string& list, const char* flag) {
  std::vector<T> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::stringstream one(item);
    T v{};
    if (!(one >> v) || !one.eof()) {
      std::fprintf(stderr, "strata_hkv_side_by_side: %s: '%s' is not a number\n", flag,
                   item.c_str());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

// The keys and buffers both tables are driven with, in device memory.
struct Workload {
  uint64_t fill = 0;                      // resident keys: KeyOfRank(0 .. fill)
  std::vector<std::vector<Key>> batches;  // per rep: hits, then new keys
  uint64_t new_per_batch = 0;             // the new keys are each batch's tail
  Key* keys = nullptr;
  float* values = nullptr;
  bool* found = nullptr;
  uint8_t* flags = nullptr;
  cudaStream_t stream = nullptr;

  void Upload(const std::vector<Key>& host) const {
    SBS_CUDA(cudaMemcpy(keys, host.data(), host.size() * sizeof(Key), cudaMemcpyHostToDevice));
  }
};

Workload MakeWorkload(const Args& a, uint64_t fill, uint32_t dim) {
  Workload w;
  w.fill = fill;
  w.new_per_batch = a.batch - static_cast<uint64_t>(a.hit_rate * static_cast<double>(a.batch));
  std::mt19937_64 rng(fill * 31 + dim);
  for (uint32_t r = 0; r < a.reps; ++r) {
    std::vector<Key> b(a.batch);
    const uint64_t hits = a.batch - w.new_per_batch;
    for (uint64_t i = 0; i < hits; ++i) b[i] = KeyOfRank(rng() % fill);
    // Never-inserted keys, distinct per rep (ranks past every filled key).
    for (uint64_t i = 0; i < w.new_per_batch; ++i) {
      b[hits + i] = KeyOfRank((uint64_t{1} << 40) + r * a.batch + i);
    }
    std::shuffle(b.begin(), b.end(), rng);
    w.batches.push_back(std::move(b));
  }
  SBS_CUDA(cudaMalloc(&w.keys, a.batch * sizeof(Key)));
  SBS_CUDA(cudaMalloc(&w.values, a.batch * dim * sizeof(float)));
  SBS_CUDA(cudaMalloc(&w.found, a.batch * sizeof(bool)));
  SBS_CUDA(cudaMalloc(&w.flags, a.batch));
  SBS_CUDA(cudaMemset(w.values, 0, a.batch * dim * sizeof(float)));
  SBS_CUDA(cudaStreamCreate(&w.stream));
  return w;
}

void FreeWorkload(Workload* w) {
  SBS_CUDA(cudaFree(w->keys));
  SBS_CUDA(cudaFree(w->values));
  SBS_CUDA(cudaFree(w->found));
  SBS_CUDA(cudaFree(w->flags));
  SBS_CUDA(cudaStreamDestroy(w->stream));
}

template <typename Fn>
double TimeCall(cudaStream_t stream, Fn&& call) {
  SBS_CUDA(cudaStreamSynchronize(stream));
  const auto start = std::chrono::steady_clock::now();
  call();
  SBS_CUDA(cudaStreamSynchronize(stream));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timing {
  double seconds[3] = {0, 0, 0};  // median per op, kOps order
  double slot_load = 0;           // occupancy after the fill
};

// The per-rep new keys, kept for erasing after an inserting op.
std::vector<Key> TailKeys(const Workload& w, uint32_t rep, uint64_t batch) {
  std::vector<Key> out(w.new_per_batch);
  for (uint64_t i = 0; i < w.new_per_batch; ++i) {
    out[i] = KeyOfRank((uint64_t{1} << 40) + rep * batch + i);
  }
  return out;
}

// Fills a table to load_factor of its slots with KeyOfRank(0 ..), then
// times each op on the workload's batches. T adapts one table: Slots(),
// Insert(n) (the fill), Op(op, n) (queues the op on w.stream), Erase(n)
// (removes the first n keys in w.keys, waiting for it) and SlotLoad().
template <typename T>
Timing Drive(const Args& a, Workload& w, double load_factor, T& table) {
  const uint64_t fill = static_cast<uint64_t>(load_factor * static_cast<double>(table.Slots()));
  std::vector<Key> host(a.batch);
  for (uint64_t begin = 0; begin < fill; begin += a.batch) {
    const uint64_t n = std::min(a.batch, fill - begin);
    host.resize(n);
    for (uint64_t i = 0; i < n; ++i) host[i] = KeyOfRank(begin + i);
    w.Upload(host);
    table.Insert(n);
  }
  Timing t;
  t.slot_load = table.SlotLoad();
  for (int op = 0; op < 3; ++op) {
    std::vector<double> reps;
    for (uint32_t r = 0; r < a.reps; ++r) {
      w.Upload(w.batches[r]);
      reps.push_back(TimeCall(w.stream, [&] { table.Op(op, a.batch); }));
      SBS_CUDA(cudaGetLastError());
      if (op > 0) {  // take the batch's new keys out again
        const std::vector<Key> tail = TailKeys(w, r, a.batch);
        w.Upload(tail);
        table.Erase(tail.size());
      }
    }
    t.seconds[op] = Median(reps);
  }
  return t;
}

// Ours: the T0 DeviceTable with SGD (rows are the embedding alone).
struct StrataAdapter {
  Workload& w;
  std::unique_ptr<DeviceTable> table;

  StrataAdapter(const Args& a, Workload& work, uint32_t dim) : w(work) {
    strata::kernels::DeviceTableOptions o;
    o.capacity_rows =
        static_cast<uint64_t>(static_cast<double>(a.slots) * strata::kernels::kLoadFactorMax);
    o.dim = dim;
    o.optimizer.kind = strata::Optimizer::kSgd;
    o.batch_keys_max = a.batch;
    auto created = DeviceTable::Create(o, strata::kernels::Runner::kGpu);
    Check(created.status(), "DeviceTable::Create");
    table = std::move(*created);
  }
  uint64_t Slots() const { return table->slots(); }
  double SlotLoad() const { return table->LoadFactor(); }
  void Insert(uint64_t n) { Check(table->FindOrInsert(w.keys, n, nullptr, w.flags, 0), "fill"); }
  void Op(int op, uint64_t n) {
    if (op == 0) {
      Check(table->FindAsync(w.keys, n, w.values, w.flags, w.stream), "find");
    } else if (op == 1) {
      Check(table->InsertOrAssignAsync(w.keys, n, w.values, nullptr, nullptr, w.stream),
            "insert_or_assign");
    } else {
      Check(table->FindOrInsertAsync(w.keys, n, w.values, w.flags, 0, w.stream), "find_or_insert");
    }
    Check(table->Synchronize(w.stream), kOps[op]);
  }
  void Erase(uint64_t n) { Check(table->Erase(w.keys, n), "erase"); }
};

using HkvTable = nv::merlin::HashTable<uint64_t, float, uint64_t, nv::merlin::EvictStrategy::kLru>;

// HierarchicalKV, LRU scores kept by the table, every value in HBM.
struct HkvAdapter {
  Workload& w;
  std::unique_ptr<HkvTable> table = std::make_unique<HkvTable>();

  HkvAdapter(const Args& a, Workload& work, uint32_t dim) : w(work) {
    nv::merlin::HashTableOptions o;
    o.init_capacity = a.slots;
    o.max_capacity = a.slots;
    o.dim = dim;
    o.max_hbm_for_vectors = a.slots * dim * sizeof(float);
    table->init(o);
  }
  uint64_t Slots() const { return table->capacity(); }
  double SlotLoad() const { return table->load_factor(w.stream); }
  void Insert(uint64_t n) {
    table->insert_or_assign(n, w.keys, w.values, nullptr, w.stream);
    SBS_CUDA(cudaStreamSynchronize(w.stream));
  }
  void Op(int op, uint64_t n) {
    if (op == 0) {
      table->find(n, w.keys, w.values, w.found, nullptr, w.stream);
    } else if (op == 1) {
      table->insert_or_assign(n, w.keys, w.values, nullptr, w.stream);
    } else {
      table->find_or_insert(n, w.keys, w.values, nullptr, w.stream);
    }
  }
  void Erase(uint64_t n) {
    table->erase(n, w.keys, w.stream);
    SBS_CUDA(cudaStreamSynchronize(w.stream));
  }
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"T0 DeviceTable beside HierarchicalKV: find, insert_or_assign, find_or_insert"};
  app.add_option("--slots", a.slots, "slots of each table (HKV capacity)")
      ->check(CLI::Range(uint64_t{1} << 16, uint64_t{1} << 32));
  app.add_option("--dim", a.dims, "embedding dims, comma separated");
  app.add_option("--load-factor", a.load_factors, "fill as a fraction of the slots, in (0, 0.9]");
  app.add_option("--batch", a.batch, "keys per call")->check(CLI::Range(1, 1 << 26));
  app.add_option("--hit-rate", a.hit_rate, "fraction of each batch already resident")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--reps", a.reps, "timed calls per op (median reported)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--json", a.json, "also write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  const auto dims = SplitNumbers<uint32_t>(a.dims, "--dim");
  const auto lfs = SplitNumbers<double>(a.load_factors, "--load-factor");
  for (double lf : lfs) {
    if (!(lf > 0 && lf <= 0.9)) {
      std::fprintf(stderr, "strata_hkv_side_by_side: --load-factor %g: not in (0, 0.9]\n", lf);
      return 2;
    }
  }
  for (uint32_t d : dims) {
    if (d == 0 || d > strata::kTableDimMax) {
      std::fprintf(stderr, "strata_hkv_side_by_side: --dim %u: not in [1, %u]\n", d,
                   strata::kTableDimMax);
      return 2;
    }
  }
  int device = 0;
  if (cudaGetDeviceCount(&device) != cudaSuccess || device == 0) {
    std::fprintf(stderr, "strata_hkv_side_by_side: no GPU visible\n");
    return 3;
  }
  cudaDeviceProp prop{};
  SBS_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("GPU %s, %llu slots, batch %llu keys, hit rate %.2f, median of %u calls\n", prop.name,
              static_cast<unsigned long long>(a.slots), static_cast<unsigned long long>(a.batch),
              a.hit_rate, a.reps);
  std::printf("%-17s %4s %5s %11s %11s %8s\n", "op", "dim", "load", "strata_G/s", "hkv_G/s",
              "ratio");
  nlohmann::json results = nlohmann::json::array();
  for (uint32_t dim : dims) {
    for (double lf : lfs) {
      Workload w = MakeWorkload(a, static_cast<uint64_t>(lf * static_cast<double>(a.slots)), dim);
      Timing ours, hkv;
      {  // one table on the GPU at a time
        StrataAdapter table(a, w, dim);
        ours = Drive(a, w, lf, table);
      }
      {
        HkvAdapter table(a, w, dim);
        hkv = Drive(a, w, lf, table);
      }
      FreeWorkload(&w);
      for (int op = 0; op < 3; ++op) {
        const double ours_rate = static_cast<double>(a.batch) / ours.seconds[op] / 1e9;
        const double hkv_rate = static_cast<double>(a.batch) / hkv.seconds[op] / 1e9;
        std::printf("%-17s %4u %5.2f %11.3f %11.3f %8.2f\n", kOps[op], dim, lf, ours_rate, hkv_rate,
                    ours_rate / hkv_rate);
        std::fflush(stdout);
        results.push_back({{"op", kOps[op]},
                           {"dim", dim},
                           {"load_factor", lf},
                           {"strata_slot_load", ours.slot_load},
                           {"hkv_slot_load", hkv.slot_load},
                           {"strata_gkeys_per_s", ours_rate},
                           {"hkv_gkeys_per_s", hkv_rate},
                           {"ratio", ours_rate / hkv_rate}});
      }
    }
  }
  if (!a.json.empty()) {
    nlohmann::json out = {
        {"bench", "hkv_side_by_side"}, {"gpu", prop.name}, {"slots", a.slots},  {"batch", a.batch},
        {"hit_rate", a.hit_rate},      {"reps", a.reps},   {"results", results}};
    std::ofstream(a.json) << out.dump(2) << "\n";
  }
  return 0;
}
