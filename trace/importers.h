// Importers from text formats into traces, and the export back to text.
//
//   criteo: the Criteo Display Advertising TSV (label, I1..I13, C1..C26). One
//           table per categorical column C1..C26, key = XXH64 of the value's
//           text seeded by its column; missing values are skipped. One batch
//           per `batch_size` rows.
//   csv:    a header row naming the columns, then one sample per row. The
//           columns named in `columns` (all but `label` when empty) become
//           tables; key = XXH64 of the value seeded by the table index.
//           Fields are split at `delimiter`; a field may be quoted
//           ("a,b", "" is a quote) and must close on its line (trace/csv.h).
//   lines:  one batch per line, decimal keys (0 .. 2^64-1) separated by
//           spaces or tabs, one table named "keys".
// Every batch is worker 0 at clock = batch index. Errors name the file, line
// and column; a failed import leaves no trace file behind, and an output
// that is the input is refused before either is touched.
//
// Thread safety: functions; each reads one file and writes one trace.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "strata/status.h"
#include "strata/trace.h"

namespace strata::trace {

struct ImportOptions {
  uint32_t batch_size = 4096;        // rows per batch (criteo, csv)
  std::string label;                 // csv: label column, skipped
  std::vector<std::string> columns;  // csv: categorical columns (empty: all but label)
  char delimiter = ',';              // csv
};

// Ok when `output` may receive a trace made from the file `input`: a file
// can be written there (base::CheckOutputFile) and neither it nor the
// temporary file the trace is written to first (`output` + ".tmp") is
// `input` under another name (a link, a hard link). InvalidArgument naming
// `option` and both paths otherwise. Every importer checks this before it
// reads its input.
[[nodiscard]] Status CheckTraceOutput(const std::string& option, const std::string& output,
                                      const std::string& input);

// The key a text value of column `column` becomes (criteo and csv).
Key HashFeature(uint32_t column, const char* value, size_t len);

Result<TraceTotals> ImportCriteo(const std::string& input, const std::string& output,
                                 const ImportOptions& options);
Result<TraceTotals> ImportCsv(const std::string& input, const std::string& output,
                              const ImportOptions& options);
Result<TraceTotals> ImportLines(const std::string& input, const std::string& output);

// Writes one line per batch: the keys of `table` (all tables, concatenated in
// id order, when table < 0) in decimal, separated by single spaces.
[[nodiscard]] Status ExportLines(const std::string& trace_path, int64_t table, std::FILE* out);

}  // namespace strata::trace
