// Trace statistics (info.h).
#include "trace/info.h"

#include <algorithm>
#include <functional>

#include "trace/key_index.h"

namespace strata::trace {

Result<TraceInfo> ComputeTraceInfo(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(path));
  TraceInfo info;
  info.version = reader->header().version;
  info.worker_count = reader->header().worker_count;
  for (const auto& t : reader->header().tables) info.tables.push_back({t.name, t.key_space});
  KeyIndex index;
  std::vector<uint32_t> counts;   // by row id
  std::vector<uint64_t> seen_in;  // by row id: batch + 1 of its last appearance
  TraceBatch batch;
  uint64_t batch_rows_sum = 0;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(bool more, reader->Next(&batch));
    if (!more) break;
    const uint64_t stamp = ++info.batches;
    uint64_t batch_rows = 0;
    for (const auto& t : batch.tables) {
      info.tables[t.table].keys += t.keys.size();
      for (Key k : t.keys) {
        bool inserted = false;
        const uint32_t id = index.Insert(t.table, k, &inserted);
        if (inserted) {
          counts.push_back(0);
          seen_in.push_back(0);
        }
        counts[id]++;
        if (seen_in[id] != stamp) {
          seen_in[id] = stamp;
          batch_rows++;
        }
      }
    }
    batch_rows_sum += batch_rows;
    info.batch_rows_max = std::max(info.batch_rows_max, batch_rows);
  }
  info.keys = reader->totals().keys;
  info.unique_keys = index.size();
  info.batch_rows_mean =
      info.batches == 0 ? 0
                        : static_cast<double>(batch_rows_sum) / static_cast<double>(info.batches);
  // Per-table skew: counts grouped by table, top 1% summed.
  std::vector<std::vector<uint32_t>> by_table(info.tables.size());
  for (uint32_t id = 0; id < index.size(); ++id) by_table[index.TableOf(id)].push_back(counts[id]);
  for (size_t t = 0; t < info.tables.size(); ++t) {
    auto& c = by_table[t];
    TableInfo& ti = info.tables[t];
    ti.unique_keys = c.size();
    if (c.empty()) continue;
    const size_t top = std::max<size_t>(1, c.size() / 100);
    std::nth_element(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(top - 1), c.end(),
                     std::greater<>());
    uint64_t top_sum = 0;
    for (size_t i = 0; i < top; ++i) top_sum += c[i];
    ti.max_key_count = *std::max_element(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(top));
    ti.top1_share = static_cast<double>(top_sum) / static_cast<double>(ti.keys);
  }
  return info;
}

}  // namespace strata::trace
