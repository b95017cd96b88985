// Dataset: click logs read into memory, in the shape the model consumes.
//
// Two readers:
//  - Criteo TSV (the Display Advertising Challenge layout): label, 13 integer
//    features I1..I13, 26 categorical features C1..C26, tab separated, any
//    field but the label may be empty (missing).
//  - CSV with a header line: `label_column` names the 0/1 label,
//    `categorical_columns` the columns that become embedding tables and
//    `dense_columns` (optional) numeric columns.
// Each categorical column becomes one Strata table; a value becomes the key
// HashFeature(column, value). A missing (empty) value has no key: the row has
// no feature in that table. A dense value x becomes sign(x) * log(1 + |x|)
// (heavy-tailed counts tamed); a missing one becomes 0.
//
// Thread safety: a Dataset is a plain value; const access from any thread.
// Errors name the file, line and column at fault; nothing is returned then.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"
#include "strata/types.h"

namespace strata::train {

struct Dataset {
  std::vector<std::string> categorical_names;  // one per table ("C1".. for Criteo)
  std::vector<std::string> dense_names;        // "I1".. for Criteo
  std::vector<float> labels;                   // rows, each 0 or 1
  std::vector<float> dense;                    // rows * dense_names.size(), transformed
  std::vector<Key> keys;                       // rows * categorical_names.size()
  std::vector<uint8_t> present;                // 1 where keys[...] holds a value

  size_t rows() const { return labels.size(); }
  size_t dense_columns() const { return dense_names.size(); }
  size_t categorical_columns() const { return categorical_names.size(); }
  // REQUIRES: row < rows(), column < categorical_columns().
  bool Present(size_t row, size_t column) const {
    return present[row * categorical_columns() + column] != 0;
  }
  Key KeyAt(size_t row, size_t column) const { return keys[row * categorical_columns() + column]; }
  const float* DenseRow(size_t row) const { return dense.data() + row * dense_columns(); }
};

// The key of `value` in categorical column `column`: a 64-bit hash of both,
// stable across runs and machines (FNV-1a over the bytes, then a splitmix64
// finalizer seeded by the column).
Key HashFeature(uint32_t column, std::string_view value);

// sign(x) * log(1 + |x|).
float TransformDense(double x);

// Reads a Criteo TSV file; at most `rows_max` rows (0: all, up to kRowsMax).
Result<Dataset> ReadCriteoTsv(const std::string& path, size_t rows_max = 0);

struct CsvSpec {
  std::string label_column;
  std::vector<std::string> categorical_columns;
  std::vector<std::string> dense_columns;  // may be empty
  char separator = ',';
};

// Reads a CSV file whose first line names the columns (plain fields, or
// double-quoted fields without line breaks). Columns not named are ignored.
Result<Dataset> ReadCsv(const std::string& path, const CsvSpec& spec, size_t rows_max = 0);

// Parses CSV/Criteo text already in memory (the readers above call these;
// `source` names the input in error messages).
Result<Dataset> ParseCriteoTsv(std::string_view text, std::string_view source, size_t rows_max);
Result<Dataset> ParseCsv(std::string_view text, std::string_view source, const CsvSpec& spec,
                         size_t rows_max);

}  // namespace strata::train
