// Limits of the training example: every queue, batch and input it accepts is
// bounded by a named constant here, checked where the value enters (flags,
// file headers), so a bad argument gets a clear error instead of an
// allocation that never ends. Plain constants; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::train {

inline constexpr size_t kLineBytesMax = 1 << 20;        // one input line
inline constexpr size_t kRowsMax = 100'000'000;         // rows read into memory
inline constexpr size_t kCategoricalColumnsMax = 256;   // tables of the model
inline constexpr size_t kDenseColumnsMax = 256;         // integer features
inline constexpr uint32_t kBatchRowsMax = 1 << 16;      // rows per mini-batch
inline constexpr uint32_t kLookaheadBatchesMax = 1024;  // intents this far ahead at most
inline constexpr uint32_t kEmbeddingDimMax = 1024;      // FM factor dimension
inline constexpr uint32_t kEpochsMax = 1000;
// Training steps between merges of the ranks' dense parameters (--kstep).
inline constexpr uint32_t kKStepMax = 1'000'000;
// Learning rate and L2 penalty (--lr, --l2).
inline constexpr double kLearningRateMax = 1000;
inline constexpr double kL2Max = 1000;
// Distinct values counted per column to weight its share of T0.
inline constexpr size_t kDeviceWeightKeysMax = 4096;

// Criteo Display Advertising Challenge layout: label, I1..I13, C1..C26.
inline constexpr size_t kCriteoDenseColumns = 13;
inline constexpr size_t kCriteoCategoricalColumns = 26;

}  // namespace strata::train
