// Core vocabulary types shared by every module and the public API.
//
// Key: a 64-bit feature id, already hashed by the pipeline; every value is
// valid, 0 and 2^64-1 included. TableId names a table of a store, WorkerId a
// registered worker, Clock a worker's logical clock (advanced once per
// mini-batch). All are plain integers: copy freely, thread-safe as values.
#pragma once

#include <cstdint>
#include <limits>

namespace strata {

using Key = uint64_t;
using TableId = uint32_t;
using WorkerId = uint32_t;
using Clock = int64_t;

inline constexpr Key kKeyMin = 0;
inline constexpr Key kKeyMax = std::numeric_limits<Key>::max();
inline constexpr Clock kClockNever = std::numeric_limits<Clock>::max();

}  // namespace strata
