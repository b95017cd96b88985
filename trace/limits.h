// Limits of the trace tools (generator, importers, simulator). The format's
// own limits live with its constants in include/strata/trace.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::trace {

// Generator: samples per batch and ids per sample per table.
inline constexpr uint32_t kBatchSizeMax = 1 << 20;
inline constexpr uint32_t kHotnessMax = 1024;
// Generator: batches in all (the cache simulator numbers batches in 32 bits)
// and the largest scaled key space of one table.
inline constexpr uint64_t kGenBatchesMax = uint64_t{1} << 30;
inline constexpr double kGenKeySpaceMax = 0x1p62;
// Generator: the largest Zipf exponent (0: uniform; 10 puts nearly every
// draw on the first key already).
inline constexpr double kGenExponentMax = 10;
// Importers: bytes of one input line, columns of a CSV file.
inline constexpr size_t kImportLineBytesMax = 1 << 20;
inline constexpr size_t kCsvColumnsMax = 4096;
// Cache simulator: distinct (table, key) pairs it can index (dense u32 ids).
inline constexpr uint64_t kSimulatorKeysMax = (uint64_t{1} << 32) - 2;

}  // namespace strata::trace
