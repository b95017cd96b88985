#include "storage/ssd/row_store_factory.h"

#include <bit>
#include <cmath>
#include <set>

#include "storage/ssd/limits.h"
#include "storage/ssd/log_row_store.h"
#include "storage/ssd/manifest.h"
#include "storage/ssd/native_row_store.h"
#include "storage/ssd/rocksdb_row_store.h"

namespace strata::storage {

Status ValidateTableSpecs(const std::vector<TableSpec>& tables) {
  if (tables.empty()) return Status::InvalidArgument("row store: no tables given");
  if (tables.size() > kTablesMax) {
    return Status::InvalidArgument("row store: " + std::to_string(tables.size()) +
                                   " tables, more than " + std::to_string(kTablesMax));
  }
  std::set<TableId> ids;
  std::set<std::string> names;
  for (const TableSpec& t : tables) {
    const std::string what = "table '" + t.name + "' (id " + std::to_string(t.id) + ")";
    if (t.name.empty() || t.name.size() > kRowStoreTableNameBytesMax) {
      return Status::InvalidArgument(what + ": name must have 1 to " +
                                     std::to_string(kRowStoreTableNameBytesMax) + " bytes");
    }
    if (t.row_bytes == 0 || t.row_bytes > kRowBytesMax) {
      return Status::InvalidArgument(what + ": row_bytes " + std::to_string(t.row_bytes) +
                                     " not in [1, kRowBytesMax]");
    }
    if (!ids.insert(t.id).second) return Status::InvalidArgument(what + ": duplicate id");
    if (!names.insert(t.name).second) return Status::InvalidArgument(what + ": duplicate name");
  }
  return Status::Ok();
}

Status CompareTableSpecs(const std::vector<TableSpec>& stored,
                         const std::vector<TableSpec>& requested, const std::string& dir) {
  auto describe = [](const TableSpec& t) {
    return "'" + t.name + "' (id " + std::to_string(t.id) + ", row_bytes " +
           std::to_string(t.row_bytes) + ")";
  };
  for (const TableSpec& r : requested) {
    const TableSpec* match = nullptr;
    for (const TableSpec& s : stored) {
      if (s.id == r.id) match = &s;
    }
    if (match == nullptr) {
      return Status::InvalidArgument(dir + ": table " + describe(r) + " is not in the store");
    }
    if (match->name != r.name || match->row_bytes != r.row_bytes) {
      return Status::InvalidArgument(dir + ": table " + describe(r) + " differs from stored " +
                                     describe(*match));
    }
  }
  for (const TableSpec& s : stored) {
    bool found = false;
    for (const TableSpec& r : requested) found = found || r.id == s.id;
    if (!found) {
      return Status::InvalidArgument(dir + ": stored table " + describe(s) +
                                     " is missing from the tables given");
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<RowStore>> OpenRowStore(const RowStoreOptions& options,
                                               const std::vector<TableSpec>& tables) {
  STRATA_RETURN_IF_ERROR(ValidateTableSpecs(tables));
  if (options.dir.empty()) return Status::InvalidArgument("row store: options.dir is empty");
  switch (options.backend) {
    case SsdBackend::kNative: {
      if (options.ssd_format_version != 1 && options.ssd_format_version != 2) {
        return Status::InvalidArgument("row store " + options.dir + ": ssd_format_version " +
                                       std::to_string(options.ssd_format_version) +
                                       " is not 1 or 2");
      }
      if (!std::has_single_bit(options.ssd_segment_bytes) ||
          options.ssd_segment_bytes < kSegmentBytesMin ||
          options.ssd_segment_bytes > kSegmentBytesMax) {
        return Status::InvalidArgument(
            "row store " + options.dir + ": ssd_segment_bytes " +
            std::to_string(options.ssd_segment_bytes) + " is not a power of two in [" +
            std::to_string(kSegmentBytesMin) + ", " + std::to_string(kSegmentBytesMax) + "]");
      }
      if (options.ssd_index != SsdIndex::kCompact && options.ssd_index != SsdIndex::kExact &&
          options.ssd_index != SsdIndex::kRanges) {
        return Status::InvalidArgument("row store " + options.dir + ": ssd_index " +
                                       std::to_string(static_cast<int>(options.ssd_index)) +
                                       " is not kCompact, kExact or kRanges");
      }
      if (options.ssd_range_bits > kRangeBitsMax) {
        return Status::InvalidArgument("row store " + options.dir + ": ssd_range_bits " +
                                       std::to_string(options.ssd_range_bits) + " is above " +
                                       std::to_string(kRangeBitsMax));
      }
      if (!std::isfinite(options.ssd_merge_log_fraction) || options.ssd_merge_log_fraction <= 0 ||
          options.ssd_merge_log_fraction > 8) {
        return Status::InvalidArgument("row store " + options.dir + ": ssd_merge_log_fraction " +
                                       std::to_string(options.ssd_merge_log_fraction) +
                                       " is not a number in (0, 8]");
      }
      // Cleaning bounds: a trigger below 1 (less room than the live rows)
      // would keep the cleaner busy for ever, a negative slack would make
      // puts wait below the trigger, and NaN compares false everywhere.
      if (!std::isfinite(options.gc_space_amp_trigger) || options.gc_space_amp_trigger < 1.0) {
        return Status::InvalidArgument("row store " + options.dir + ": gc_space_amp_trigger " +
                                       std::to_string(options.gc_space_amp_trigger) +
                                       " is not a finite number of at least 1");
      }
      if (!std::isfinite(options.gc_space_amp_stall_slack) ||
          options.gc_space_amp_stall_slack < 0.0) {
        return Status::InvalidArgument("row store " + options.dir + ": gc_space_amp_stall_slack " +
                                       std::to_string(options.gc_space_amp_stall_slack) +
                                       " is not a finite number of at least 0");
      }
      // An existing directory opens in the format it was written in.
      io::Env* env = options.env != nullptr ? options.env : io::Env::Default();
      STRATA_ASSIGN_OR_RETURN(std::optional<uint32_t> version,
                              ReadManifestVersion(env, options.dir));
      // Version 3: format 2 with key ranges (the MANIFEST's frame only).
      if (version.value_or(options.ssd_format_version) >= 2) {
        return OpenLogRowStore(options, tables);
      }
      return OpenNativeRowStore(options, tables);
    }
    case SsdBackend::kRocksDb:
      return OpenRocksDbRowStore(options, tables);
  }
  return Status::InvalidArgument("row store: unknown backend");
}

}  // namespace strata::storage
