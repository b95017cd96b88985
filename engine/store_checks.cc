// What Open and every call accept: options and tables at Open, then the
// store being open, worker and table ids and batch shapes on every call. A
// refusal is InvalidArgument (or FailedPrecondition) naming the argument at
// fault, and changes nothing.
#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>

#include "engine/fault_options.h"
#include "engine/store_impl.h"
#include "storage/ssd/limits.h"

namespace strata::engine {
namespace {

Status CheckStoreOptions(const StoreOptions& options, const std::vector<TableOptions>& tables) {
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
  if (options.dram_shards > kDramShardsMax ||
      !std::has_single_bit(std::max(options.dram_shards, 1u))) {
    return Status::InvalidArgument(
        "StoreOptions.dram_shards = " + std::to_string(options.dram_shards) +
        ": neither 0 (automatic) nor a power of two in [1, " + std::to_string(kDramShardsMax) +
        "]");
  }
  if (!(options.device_share_growth_max >= 0 &&
        options.device_share_growth_max <= kDeviceShareGrowthMax)) {
    return Status::InvalidArgument("StoreOptions.device_share_growth_max = " +
                                   std::to_string(options.device_share_growth_max) +
                                   " must lie in [0, " + std::to_string(kDeviceShareGrowthMax) +
                                   "]");
  }
  if (!(options.ssd_write_log_fraction >= 0 &&
        options.ssd_write_log_fraction <= kSsdWriteLogFractionMax)) {
    return Status::InvalidArgument(
        "StoreOptions.ssd_write_log_fraction = " + std::to_string(options.ssd_write_log_fraction) +
        " must lie in [0, " + std::to_string(kSsdWriteLogFractionMax) + "]");
  }
  if (options.ssd_format_version != 1 && options.ssd_format_version != 2) {
    return Status::InvalidArgument("StoreOptions.ssd_format_version = " +
                                   std::to_string(options.ssd_format_version) + " must be 1 or 2");
  }
  if (!std::has_single_bit(options.ssd_segment_bytes) ||
      options.ssd_segment_bytes < storage::kSegmentBytesMin ||
      options.ssd_segment_bytes > storage::kSegmentBytesMax) {
    return Status::InvalidArgument(
        "StoreOptions.ssd_segment_bytes = " + std::to_string(options.ssd_segment_bytes) +
        " must be a power of two in [" + std::to_string(storage::kSegmentBytesMin) + ", " +
        std::to_string(storage::kSegmentBytesMax) + "]");
  }
  if (options.ssd_index != SsdIndex::kCompact && options.ssd_index != SsdIndex::kExact &&
      options.ssd_index != SsdIndex::kRanges) {
    return Status::InvalidArgument(
        "StoreOptions.ssd_index = " + std::to_string(static_cast<int>(options.ssd_index)) +
        " must be SsdIndex::kCompact, kExact or kRanges");
  }
  if (options.ssd_range_bits > storage::kRangeBitsMax) {
    return Status::InvalidArgument(
        "StoreOptions.ssd_range_bits = " + std::to_string(options.ssd_range_bits) +
        " must be at most " + std::to_string(storage::kRangeBitsMax));
  }
  if (!(options.ssd_merge_log_fraction > 0 && options.ssd_merge_log_fraction <= 8)) {
    return Status::InvalidArgument(
        "StoreOptions.ssd_merge_log_fraction = " + std::to_string(options.ssd_merge_log_fraction) +
        " must be in (0, 8]");
  }
  if (!(options.timing_alpha > 0 && options.timing_alpha <= 1) ||
      !(options.timing_quantile > 0 && options.timing_quantile < 1) ||
      !(options.timing_lambda0 >= 0)) {
    return Status::InvalidArgument(
        "StoreOptions: timing_alpha must be in (0, 1], timing_quantile in (0, 1), "
        "timing_lambda0 >= 0");
  }
  STRATA_RETURN_IF_ERROR(CheckFaultOptions(options.faults, "StoreOptions.faults"));
  if (options.faults.enabled() && options.ssd_backend != SsdBackend::kNative) {
    return Status::InvalidArgument(
        "StoreOptions.faults: fault injection needs the native SSD backend (RocksDB does its "
        "own file access)");
  }
  return Status::Ok();
}

// Table i of `tables`, after the ones before it.
Status CheckTableOptions(const std::vector<TableOptions>& tables, size_t i) {
  const TableOptions& t = tables[i];
  if (!IsValidTableName(t.name)) {
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
  return Status::Ok();
}

}  // namespace

Status StoreImpl::ValidateOptions(const StoreOptions& options,
                                  const std::vector<TableOptions>& tables) {
  STRATA_RETURN_IF_ERROR(CheckStoreOptions(options, tables));
  for (size_t i = 0; i < tables.size(); ++i) STRATA_RETURN_IF_ERROR(CheckTableOptions(tables, i));
  return Status::Ok();
}

Status StoreImpl::CheckOpen() const {
  if (close_.closed.load(std::memory_order_acquire)) {
    return Status::FailedPrecondition("store " + options_.dir + " is closed");
  }
  return Status::Ok();
}

Status StoreImpl::CheckWorker(WorkerId worker) const {
  if (worker >= workers_.count.load(std::memory_order_acquire)) {
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

Status StoreImpl::CheckDataCall(WorkerId worker, TableId table, std::span<const Key> keys,
                                const void* data, const char* what) const {
  STRATA_RETURN_IF_ERROR(CheckOpen());
  STRATA_RETURN_IF_ERROR(CheckWorker(worker));
  STRATA_RETURN_IF_ERROR(CheckTable(table));
  return CheckBatch(keys, data, what);
}

}  // namespace strata::engine
