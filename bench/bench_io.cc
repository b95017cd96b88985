// `strata bench io`: random or sequential reads or writes of one file through
// io::IoThreads at a fixed queue depth, as fio measures a device.
//
//   strata bench io --file F --size-gib 1 --block 4096 --depth 64 --threads 1
//                   --mode randread --seconds 5 [--backend uring|psync]
//                   [--io-cores 0,1] [--buffered] [--json]
//
// A missing --file is created and filled to --size-gib with pseudo-random
// bytes, after a check that its file system has that much free; the fill
// shows its progress and counts in --seconds, the time limit of the whole
// run (a fill that does not finish in time fails and removes the file).
// An existing file is only read: it must hold --size-gib already, and the
// write modes refuse it, unless --overwrite lets the command write it (and
// extend it when shorter). Then `depth` requests are kept in flight for the
// rest of --seconds: each completion records its latency and issues the next
// request from the I/O thread (like fio's iodepth with one job per I/O
// thread). Reports IOPS, MB/s (10^6 bytes) and latency percentiles from
// every request's submit-to-completion time, and the process's CPU time
// (user + system) per I/O over the measured run.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/command.h"
#include "io/aligned.h"
#include "io/io_threads.h"
#include "io/limits.h"
#include "io/topology.h"

namespace strata::cli {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The largest file the benchmark accepts, GiB (1 PiB: far below 2^64 bytes).
constexpr double kSizeGibMax = 1 << 20;
// Requests in flight.
constexpr uint32_t kDepthMax = 1024;

struct IoBenchArgs {
  std::string file;
  double size_gib = 1;
  uint32_t block = 4096;
  uint32_t depth = 64;
  uint32_t threads = 1;
  std::string mode = "randread";
  double seconds = 5;
  std::string backend = "auto";
  std::string io_cores;
  bool buffered = false;
  bool overwrite = false;
  bool json = false;
};

// One request slot: at most one request in flight, so its fields (and its
// latency log) are touched by one thread at a time.
struct Slot {
  io::IoRequest req;
  SteadyClock::time_point issued;
  std::vector<uint32_t> latency_ns;
  std::mt19937_64 rng;
  uint8_t* buf = nullptr;
  bool from_pool = false;
};

struct Run {
  io::IoThreads* io = nullptr;
  uint64_t blocks = 0;
  uint32_t block = 0;
  bool random = true;
  std::atomic<uint64_t> cursor{0};
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> outstanding{0};
  std::atomic<uint64_t> errors{0};
  std::string first_error;  // written once, by the first failing callback
  std::atomic<bool> error_taken{false};
};

void Issue(Run* run, Slot* slot);

void OnDone(Run* run, Slot* slot) {
  const auto now = SteadyClock::now();
  if (!slot->req.status.ok()) {
    if (!run->error_taken.exchange(true)) run->first_error = slot->req.status.ToString();
    run->errors.fetch_add(1, std::memory_order_relaxed);
    run->stop.store(true, std::memory_order_relaxed);
  } else {
    slot->latency_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - slot->issued).count(),
        UINT32_MAX)));
  }
  if (run->stop.load(std::memory_order_relaxed)) {
    if (run->outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      run->outstanding.notify_all();
    }
    return;
  }
  Issue(run, slot);
}

void Issue(Run* run, Slot* slot) {
  const uint64_t block_index =
      run->random ? slot->rng() % run->blocks
                  : run->cursor.fetch_add(1, std::memory_order_relaxed) % run->blocks;
  slot->req.offset = block_index * run->block;
  slot->issued = SteadyClock::now();
  Status s = run->io->Submit({&slot->req, 1},
                             [run, slot](std::span<io::IoRequest>) { OnDone(run, slot); });
  if (!s.ok()) {  // a bad request: report and stop this slot
    slot->req.status = s;
    run->stop.store(true, std::memory_order_relaxed);
    OnDone(run, slot);
  }
}

std::string GiB(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

// Extends `file` to `bytes` with pseudo-random data (so reads hit real
// blocks), by `deadline`; prints its progress to stderr about once a second.
Status LayOut(io::File* file, uint64_t bytes, SteadyClock::time_point deadline) {
  STRATA_ASSIGN_OR_RETURN(uint64_t have, file->Size());
  if (have >= bytes) return Status::Ok();
  constexpr size_t kChunk = 1 << 20;
  STRATA_ASSIGN_OR_RETURN(auto chunk, io::AlignedBuffer::Allocate(kChunk));
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < kChunk / 8; ++i) reinterpret_cast<uint64_t*>(chunk.data())[i] = rng();
  const auto start = SteadyClock::now();
  auto report_at = start + std::chrono::seconds(1);
  for (uint64_t off = io::AlignDown(have, kChunk); off < bytes; off += kChunk) {
    STRATA_RETURN_IF_ERROR(file->Write(off, chunk.data(), std::min<uint64_t>(kChunk, bytes - off)));
    const uint64_t done = std::min<uint64_t>(off + kChunk, bytes);
    const auto now = SteadyClock::now();
    if (now >= deadline && done < bytes) {
      return Status::ResourceExhausted("filling --file " + file->path() + " to " + GiB(bytes) +
                                       " took all of --seconds (" + GiB(done) +
                                       " written); the time limit counts the fill: raise it");
    }
    if (now >= report_at) {
      const double seconds = std::chrono::duration<double>(now - start).count();
      std::fprintf(stderr, "bench io: filling %s: %s of %s, %.0f MB/s\n", file->path().c_str(),
                   GiB(done).c_str(), GiB(bytes).c_str(),
                   static_cast<double>(done - std::min(done, have)) / seconds / 1e6);
      report_at = now + std::chrono::seconds(1);
    }
  }
  return file->Sync();
}

// Bytes free to an unprivileged writer on the file system holding `dir`.
Result<uint64_t> FreeBytes(const std::string& dir) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return Status::FromErrno(errno, "statvfs " + dir);
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

// Makes `a.file` hold `bytes` to run on, within `deadline`, writing only a
// file this run creates unless --overwrite; refuses before it writes when
// the file system has not the room. A file created here and not filled is
// removed.
Status PrepareFile(const IoBenchArgs& a, bool write, uint64_t bytes,
                   SteadyClock::time_point deadline) {
  const std::string& path = a.file;
  char size_gib[32];
  std::snprintf(size_gib, sizeof(size_gib), "%.15g", a.size_gib);
  const std::string size =
      "--size-gib " + std::string(size_gib) + " (" + std::to_string(bytes) + " bytes)";
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) return Status::FromErrno(errno, "--file " + path + ": stat");
  if (exists && !S_ISREG(st.st_mode)) {
    return Status::InvalidArgument("--file " + path + " is not a regular file");
  }
  const uint64_t have = exists ? static_cast<uint64_t>(st.st_size) : 0;
  if (exists && !a.overwrite) {
    if (have < bytes) {
      return Status::FailedPrecondition(
          "--file " + path + " exists with " + std::to_string(have) + " bytes, fewer than " + size +
          "; bench io fills only a file it creates: name a new file, or pass --overwrite to let "
          "it write this one");
    }
    if (write) {
      return Status::FailedPrecondition("--mode " + a.mode + " would write over --file " + path +
                                        ", which exists: name a new file, or pass --overwrite");
    }
  }
  if (have >= bytes) return Status::Ok();
  const std::string dir = path.substr(0, path.find_last_of('/') + 1);
  STRATA_ASSIGN_OR_RETURN(const uint64_t free_bytes, FreeBytes(dir.empty() ? "." : dir));
  if (bytes - have > free_bytes) {
    return Status::ResourceExhausted("--file " + path + ": " + size + " needs " +
                                     std::to_string(bytes - have) + " bytes more and its file " +
                                     "system has " + std::to_string(free_bytes) + " bytes free");
  }
  if (!exists) {  // exclusive: a file that appeared since the stat is not ours
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return Status::FromErrno(errno, "--file " + path + ": create");
    ::close(fd);
  }
  io::Env* env = io::Env::Default();
  Status filled = [&]() -> Status {
    STRATA_ASSIGN_OR_RETURN(auto file, env->OpenFile(path, {}));
    return LayOut(file.get(), bytes, deadline);
  }();
  if (!filled.ok() && !exists) {
    if (Status removed = env->DeleteFile(path); !removed.ok()) {
      return filled.WithContext("(and could not remove it: " + removed.ToString() + ")");
    }
  }
  return filled;
}

// CPU seconds (user + system) this process has used so far.
double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double Percentile(const std::vector<uint32_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t index = std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()));
  return sorted[index] / 1000.0;
}

Status RunIoBench(const IoBenchArgs& a) {
  const auto run_start = SteadyClock::now();
  const bool random = a.mode == "randread" || a.mode == "randwrite";
  const bool write = a.mode == "randwrite" || a.mode == "write";
  if (!random && a.mode != "read" && a.mode != "write") {
    return Status::InvalidArgument("--mode must be randread, randwrite, read or write, not " +
                                   a.mode);
  }
  if (a.block == 0 || a.depth == 0 || a.depth > kDepthMax || a.threads == 0 || !(a.seconds > 0)) {
    return Status::InvalidArgument(
        "--block, --threads, --seconds must be positive and "
        "--depth in [1, 1024]");
  }
  const uint64_t size_bytes =
      io::AlignDown(static_cast<uint64_t>(a.size_gib * (1ull << 30)), a.block);
  if (size_bytes < a.block) return Status::InvalidArgument("--size-gib smaller than one block");

  io::IoThreadsOptions options;
  options.threads = a.threads;
  options.topology_path = a.file.substr(0, a.file.find_last_of('/') + 1);
  if (options.topology_path.empty()) options.topology_path = ".";
  options.backend = a.backend == "uring"   ? io::IoBackend::kUring
                    : a.backend == "psync" ? io::IoBackend::kPsync
                                           : io::IoBackend::kAuto;
  if (!a.io_cores.empty()) {
    STRATA_ASSIGN_OR_RETURN(options.cores, io::ParseCpuList(a.io_cores));
  }
  options.ring_depth = std::max<uint32_t>(8, a.depth);
  options.buffers_per_thread = (a.depth + a.threads - 1) / a.threads;
  options.buffer_bytes = a.block;

  const auto deadline = run_start + std::chrono::duration_cast<SteadyClock::duration>(
                                        std::chrono::duration<double>(a.seconds));
  STRATA_RETURN_IF_ERROR(PrepareFile(a, write, size_bytes, deadline));
  const double fill_seconds = std::chrono::duration<double>(SteadyClock::now() - run_start).count();
  if (SteadyClock::now() >= deadline) {
    return Status::ResourceExhausted(
        "filling --file " + a.file + " took all of --seconds (" + std::to_string(fill_seconds) +
        " s), nothing is left to measure; the file is kept: run again, or raise --seconds");
  }
  io::Env* env = io::Env::Default();
  STRATA_ASSIGN_OR_RETURN(auto file,
                          env->OpenFile(a.file, {.direct = !a.buffered, .read_only = !write}));
  STRATA_ASSIGN_OR_RETURN(auto io, io::IoThreads::Create(options));

  Run run;
  run.io = io.get();
  run.blocks = size_bytes / a.block;
  run.block = a.block;
  run.random = random;
  std::vector<Slot> slots(a.depth);
  std::vector<io::AlignedBuffer> own_buffers;
  const uint64_t expected = static_cast<uint64_t>(a.seconds * 2e6 / a.depth) + 1024;
  for (uint32_t i = 0; i < a.depth; ++i) {
    Slot& slot = slots[i];
    slot.buf = io->AcquireBuffer();
    slot.from_pool = slot.buf != nullptr;
    if (slot.buf == nullptr) {
      STRATA_ASSIGN_OR_RETURN(auto buffer, io::AlignedBuffer::Allocate(a.block));
      slot.buf = buffer.data();
      own_buffers.push_back(std::move(buffer));
    }
    std::memset(slot.buf, static_cast<int>(i), a.block);
    slot.rng.seed(1000 + i);
    slot.latency_ns.reserve(std::min<uint64_t>(expected, 1 << 22));
    slot.req = io::IoRequest{.op = write ? io::IoRequest::Op::kWrite : io::IoRequest::Op::kRead,
                             .file = file.get(),
                             .buf = slot.buf,
                             .len = a.block};
  }

  run.outstanding.store(a.depth);
  const double cpu_start = CpuSeconds();
  const auto start = SteadyClock::now();
  for (Slot& slot : slots) Issue(&run, &slot);
  std::this_thread::sleep_until(deadline);  // the measured run: what the fill left
  run.stop.store(true);
  for (uint32_t left = run.outstanding.load(); left != 0; left = run.outstanding.load()) {
    run.outstanding.wait(left);
  }
  const double elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
  const double cpu_seconds = CpuSeconds() - cpu_start;
  if (run.errors.load() > 0) return Status::IOError("bench io: " + run.first_error);

  std::vector<uint32_t> all;
  for (Slot& slot : slots) {
    all.insert(all.end(), slot.latency_ns.begin(), slot.latency_ns.end());
    if (slot.from_pool) io->ReleaseBuffer(slot.buf);
  }
  std::sort(all.begin(), all.end());
  const double iops = all.size() / elapsed;
  const double mbps = iops * a.block / 1e6;
  const double cpu_us_per_io = all.empty() ? 0 : cpu_seconds * 1e6 / all.size();
  const double p50 = Percentile(all, 0.50), p99 = Percentile(all, 0.99),
               p999 = Percentile(all, 0.999);
  const std::vector<int> cores = io->cores();
  std::string core_list;
  for (int c : cores) core_list += (core_list.empty() ? "" : ",") + std::to_string(c);
  if (a.json) {
    nlohmann::json j = {{"mode", a.mode},
                        {"backend", io::IoBackendName(io->backend())},
                        {"block", a.block},
                        {"depth", a.depth},
                        {"threads", a.threads},
                        {"seconds", elapsed},
                        {"fill_seconds", fill_seconds},
                        {"direct", !a.buffered},
                        {"ios", all.size()},
                        {"iops", iops},
                        {"mbps", mbps},
                        {"io_cores", cores},
                        {"fixed_buffers", io->fixed_buffers(0)},
                        {"cpu_us_per_io", cpu_us_per_io},
                        {"lat_us", {{"p50", p50}, {"p99", p99}, {"p999", p999}}}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "bench io: %s %s block=%u depth=%u threads=%u cores=%s direct=%d %.1fs (fill %.1fs)\n",
        a.mode.c_str(), io::IoBackendName(io->backend()), a.block, a.depth, a.threads,
        core_list.c_str(), !a.buffered, elapsed, fill_seconds);
    std::printf("%12s %10s %10s %10s %10s %12s\n", "iops", "MB/s", "p50_us", "p99_us", "p999_us",
                "cpu_us/io");
    std::printf("%12.0f %10.1f %10.1f %10.1f %10.1f %12.2f\n", iops, mbps, p50, p99, p999,
                cpu_us_per_io);
  }
  io.reset();  // before the buffers and slots go
  return Status::Ok();
}

CommandRegistrar reg{
    "bench", [](CLI::App& group) {
      auto args = std::make_shared<IoBenchArgs>();
      CLI::App* c = group.add_subcommand("io", "I/O engine: IOPS, MB/s and latency of one file");
      c->add_option("--file", args->file,
                    "file to read/write: created and filled when missing (checked against the "
                    "free space); an existing one is only read unless --overwrite")
          ->required();
      AddReal(c, "--size-gib", args->size_gib, "bytes of the file used, GiB",
              {.min = 0, .max = kSizeGibMax, .min_open = true});
      c->add_flag("--overwrite", args->overwrite,
                  "let the write modes, and the fill of a shorter file, write an existing --file");
      AddUnsigned<uint32_t>(c, "--block", args->block, "bytes per request", 1,
                            io::kIoRequestBytesMax);
      AddUnsigned<uint32_t>(c, "--depth", args->depth, "requests in flight", 1, kDepthMax);
      AddUnsigned<uint32_t>(c, "--threads", args->threads, "I/O threads", 1, io::kIoThreadsMax);
      c->add_option("--mode", args->mode, "randread, randwrite, read or write");
      AddReal(c, "--seconds", args->seconds,
              "time limit of the run, the file's fill included; the rest is measured",
              {.min = 0, .max = kBenchSecondsMax, .min_open = true});
      c->add_option("--backend", args->backend, "uring, psync or auto");
      c->add_option("--io-cores", args->io_cores, "cores for the I/O threads, e.g. 0,2-3");
      c->add_flag("--buffered", args->buffered, "page-cache I/O instead of O_DIRECT");
      c->add_flag("--json", args->json, "one JSON object instead of the table");
      c->callback([args] {
        Status s = RunIoBench(*args);
        if (!s.ok()) {
          std::fprintf(stderr, "strata bench io: %s\n", s.ToString().c_str());
          ExitCode() = 1;
        }
      });
    }};

}  // namespace
}  // namespace strata::cli
