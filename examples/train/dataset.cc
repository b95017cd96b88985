#include "examples/train/dataset.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <fstream>
#include <istream>
#include <sstream>

#include "base/hash.h"
#include "examples/train/limits.h"
#include "trace/csv.h"

namespace strata::train {
namespace {

std::string Where(std::string_view source, size_t line) {
  return std::string(source) + ":" + std::to_string(line);
}

// Splits a Criteo line at its tabs (no quoting in that format).
void SplitTabs(std::string_view line, std::vector<std::string>* out) {
  out->clear();
  size_t start = 0;
  while (true) {
    const size_t end = line.find('\t', start);
    out->emplace_back(line.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return;
    start = end + 1;
  }
}

// Splits a CSV line by the rule trace import follows too (trace/csv.h).
Status SplitCsv(std::string_view line, char sep, std::vector<std::string>* out,
                const std::string& where) {
  if (sep == '"') return Status::InvalidArgument(where + ": a quote cannot separate CSV fields");
  return trace::SplitCsvLine(line, sep, out).WithContext(where);
}

Result<float> ParseLabel(std::string_view text, const std::string& where) {
  if (text == "0") return 0.0f;
  if (text == "1") return 1.0f;
  return Status::InvalidArgument(where + ": label '" + std::string(text) + "' is not 0 or 1");
}

// Empty -> 0 (missing); otherwise a number, transformed.
Result<float> ParseDense(std::string_view text, const std::string& where,
                         const std::string& column) {
  if (text.empty()) return 0.0f;
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value)) {
    return Status::InvalidArgument(where + ": column " + column + ": '" + std::string(text) +
                                   "' is not a number");
  }
  return TransformDense(value);
}

void AddCategorical(Dataset* d, uint32_t column, std::string_view value) {
  d->present.push_back(value.empty() ? 0 : 1);
  d->keys.push_back(value.empty() ? 0 : HashFeature(column, value));
}

bool ReadLine(std::istream& in, std::string* line, size_t line_no, std::string_view source,
              Status* status) {
  if (!std::getline(in, *line)) return false;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  if (line->size() > kLineBytesMax) {
    *status = Status::InvalidArgument(Where(source, line_no) + ": line longer than " +
                                      std::to_string(kLineBytesMax) + " bytes");
    return false;
  }
  return true;
}

size_t RowsCap(size_t rows_max) {
  return rows_max == 0 || rows_max > kRowsMax ? kRowsMax : rows_max;
}

}  // namespace

Key HashFeature(uint32_t column, std::string_view value) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a offset basis
  for (unsigned char c : value) {
    h ^= c;
    h *= 1099511628211ull;
  }
  // splitmix64 finalizer over the hash mixed with the column.
  return MixSplit64(h + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(column) + 1));
}

float TransformDense(double x) {
  double magnitude = std::log1p(std::fabs(x));
  return static_cast<float>(x < 0 ? -magnitude : magnitude);
}

namespace {

Result<Dataset> ParseCriteoStream(std::istream& in, std::string_view source, size_t rows_max) {
  Dataset d;
  for (size_t i = 1; i <= kCriteoDenseColumns; ++i)
    d.dense_names.push_back("I" + std::to_string(i));
  for (size_t i = 1; i <= kCriteoCategoricalColumns; ++i) {
    d.categorical_names.push_back("C" + std::to_string(i));
  }
  const size_t fields_expected = 1 + kCriteoDenseColumns + kCriteoCategoricalColumns;
  const size_t cap = RowsCap(rows_max);
  std::string line;
  std::vector<std::string> fields;
  Status status;
  for (size_t line_no = 1; d.rows() < cap && ReadLine(in, &line, line_no, source, &status);
       ++line_no) {
    if (line.empty()) continue;
    const std::string where = Where(source, line_no);
    SplitTabs(line, &fields);
    if (fields.size() != fields_expected) {
      return Status::InvalidArgument(where + ": " + std::to_string(fields.size()) +
                                     " tab-separated fields, a Criteo row has " +
                                     std::to_string(fields_expected));
    }
    STRATA_ASSIGN_OR_RETURN(float label, ParseLabel(fields[0], where));
    d.labels.push_back(label);
    for (size_t i = 0; i < kCriteoDenseColumns; ++i) {
      STRATA_ASSIGN_OR_RETURN(float x, ParseDense(fields[1 + i], where, d.dense_names[i]));
      d.dense.push_back(x);
    }
    for (size_t i = 0; i < kCriteoCategoricalColumns; ++i) {
      AddCategorical(&d, static_cast<uint32_t>(i), fields[1 + kCriteoDenseColumns + i]);
    }
  }
  STRATA_RETURN_IF_ERROR(status);
  if (d.rows() == 0) return Status::InvalidArgument(std::string(source) + ": no rows");
  return d;
}

Result<Dataset> ParseCsvStream(std::istream& in, std::string_view source, const CsvSpec& spec,
                               size_t rows_max) {
  if (spec.categorical_columns.empty()) {
    return Status::InvalidArgument("csv: no categorical columns named (--columns)");
  }
  if (spec.categorical_columns.size() > kCategoricalColumnsMax ||
      spec.dense_columns.size() > kDenseColumnsMax) {
    return Status::InvalidArgument("csv: too many columns named");
  }
  std::string line;
  Status status;
  if (!ReadLine(in, &line, 1, source, &status)) {
    STRATA_RETURN_IF_ERROR(status);
    return Status::InvalidArgument(std::string(source) + ": empty, expected a header line");
  }
  std::vector<std::string> header;
  STRATA_RETURN_IF_ERROR(SplitCsv(line, spec.separator, &header, Where(source, 1)));
  auto find = [&](const std::string& name) -> Result<size_t> {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return i;
    }
    return Status::InvalidArgument(Where(source, 1) + ": no column named '" + name + "'");
  };
  STRATA_ASSIGN_OR_RETURN(size_t label_index, find(spec.label_column));
  std::vector<size_t> cat_index, dense_index;
  for (const auto& name : spec.categorical_columns) {
    STRATA_ASSIGN_OR_RETURN(size_t i, find(name));
    cat_index.push_back(i);
  }
  for (const auto& name : spec.dense_columns) {
    STRATA_ASSIGN_OR_RETURN(size_t i, find(name));
    dense_index.push_back(i);
  }
  Dataset d;
  d.categorical_names = spec.categorical_columns;
  d.dense_names = spec.dense_columns;
  const size_t cap = RowsCap(rows_max);
  std::vector<std::string> fields;
  for (size_t line_no = 2; d.rows() < cap && ReadLine(in, &line, line_no, source, &status);
       ++line_no) {
    if (line.empty()) continue;
    const std::string where = Where(source, line_no);
    STRATA_RETURN_IF_ERROR(SplitCsv(line, spec.separator, &fields, where));
    if (fields.size() != header.size()) {
      return Status::InvalidArgument(where + ": " + std::to_string(fields.size()) +
                                     " fields, the header has " + std::to_string(header.size()));
    }
    STRATA_ASSIGN_OR_RETURN(float label, ParseLabel(fields[label_index], where));
    d.labels.push_back(label);
    for (size_t i = 0; i < dense_index.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(float x, ParseDense(fields[dense_index[i]], where, d.dense_names[i]));
      d.dense.push_back(x);
    }
    for (size_t i = 0; i < cat_index.size(); ++i) {
      AddCategorical(&d, static_cast<uint32_t>(i), fields[cat_index[i]]);
    }
  }
  STRATA_RETURN_IF_ERROR(status);
  if (d.rows() == 0) return Status::InvalidArgument(std::string(source) + ": no data rows");
  return d;
}

}  // namespace

Result<Dataset> ParseCriteoTsv(std::string_view text, std::string_view source, size_t rows_max) {
  std::istringstream in{std::string(text)};
  return ParseCriteoStream(in, source, rows_max);
}

Result<Dataset> ParseCsv(std::string_view text, std::string_view source, const CsvSpec& spec,
                         size_t rows_max) {
  std::istringstream in{std::string(text)};
  return ParseCsvStream(in, source, spec, rows_max);
}

Result<Dataset> ReadCriteoTsv(const std::string& path, size_t rows_max) {
  std::ifstream in(path);
  if (!in) return Status::FromErrno(errno, "open " + path);
  return ParseCriteoStream(in, path, rows_max);
}

Result<Dataset> ReadCsv(const std::string& path, const CsvSpec& spec, size_t rows_max) {
  std::ifstream in(path);
  if (!in) return Status::FromErrno(errno, "open " + path);
  return ParseCsvStream(in, path, spec, rows_max);
}

}  // namespace strata::train
