// Limits of the io module: every queue, batch and buffer here is bounded by
// one of these named constants. Plain constants; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::io {

// O_DIRECT alignment of offsets, lengths and buffer addresses.
inline constexpr size_t kIoAlignBytes = 4096;

// One request moves at most this many bytes (io_uring and pread both take
// 32-bit lengths; larger transfers are split by the caller).
inline constexpr uint32_t kIoRequestBytesMax = 1u << 30;

// Submission queue entries of one io_uring (rounded to a power of two).
inline constexpr uint32_t kRingDepthMax = 4096;
// Requests a Ring holds back when its submission queue is full.
inline constexpr uint32_t kRingPendingMax = 16384;

// I/O threads of one IoThreads instance.
inline constexpr uint32_t kIoThreadsMax = 256;
// Batches (or slices of batches) queued to one I/O thread, waiting to start.
// A power of two. A submitter waits only when its target queue is full.
inline constexpr uint32_t kIoQueueDepthMax = 1024;
// Requests of one Submit/SubmitAndWait call.
inline constexpr size_t kIoBatchRequestsMax = 1u << 20;

// Bytes of one BufferPool arena (per I/O thread).
inline constexpr size_t kBufferPoolBytesMax = size_t{16} << 30;

// Fault rules a FaultEnv holds at once.
inline constexpr size_t kFaultRulesMax = 64;

}  // namespace strata::io
