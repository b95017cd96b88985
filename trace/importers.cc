// Importers and the lines export (importers.h).
#include "trace/importers.h"

#include <xxhash.h>

#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/paths.h"
#include "strata/options.h"
#include "trace/csv.h"
#include "trace/limits.h"

namespace strata::trace {
namespace {

constexpr uint32_t kCriteoFields = 40;
constexpr uint32_t kCriteoFirstCategorical = 14;
constexpr uint32_t kCriteoCategoricals = 26;
constexpr uint64_t kFeatureSeed = 0x5354524154410000ULL;  // "STRATA\0\0"

// Reads a text file line by line (without the newline), naming line numbers.
class LineReader {
 public:
  explicit LineReader(std::string path) : path_(std::move(path)) {}
  ~LineReader() {
    std::free(buf_);
    if (file_ != nullptr) std::fclose(file_);
  }
  [[nodiscard]] Status Open() {
    file_ = std::fopen(path_.c_str(), "rb");
    if (file_ == nullptr) {
      if (errno == ENOENT) return Status::NotFound(path_ + ": no such file");
      return Status::FromErrno(errno, "open " + path_);
    }
    return Status::Ok();
  }
  // The next line, or false at the end of the file.
  Result<bool> Next(std::string_view* line) {
    errno = 0;
    const ssize_t n = ::getline(&buf_, &cap_, file_);
    if (n < 0) {
      if (errno != 0) return Status::FromErrno(errno, "read " + path_);
      return false;
    }
    ++line_number_;
    if (static_cast<size_t>(n) > kImportLineBytesMax) {
      return Error("line longer than " + std::to_string(kImportLineBytesMax) + " bytes");
    }
    size_t len = static_cast<size_t>(n);
    while (len > 0 && (buf_[len - 1] == '\n' || buf_[len - 1] == '\r')) --len;
    *line = std::string_view(buf_, len);
    return true;
  }
  Status Error(const std::string& what) const {
    return Status::InvalidArgument(path_ + " line " + std::to_string(line_number_) + ": " + what);
  }
  uint64_t line_number() const { return line_number_; }

 private:
  const std::string path_;
  std::FILE* file_ = nullptr;
  char* buf_ = nullptr;
  size_t cap_ = 0;
  uint64_t line_number_ = 0;
};

// Splits `line` at `delimiter` into `fields` (views into line).
void Split(std::string_view line, char delimiter, std::vector<std::string_view>* fields) {
  fields->clear();
  size_t start = 0;
  while (true) {
    const size_t end = line.find(delimiter, start);
    if (end == std::string_view::npos) {
      fields->push_back(line.substr(start));
      return;
    }
    fields->push_back(line.substr(start, end - start));
    start = end + 1;
  }
}

// Collects rows into batches of `batch_size` and appends them.
class Batcher {
 public:
  Batcher(TraceWriter* writer, size_t tables, uint32_t batch_size)
      : writer_(writer), batch_size_(batch_size) {
    batch_.tables.resize(tables);
    for (size_t t = 0; t < tables; ++t) batch_.tables[t].table = static_cast<TableId>(t);
  }
  void Add(size_t table, Key key) { batch_.tables[table].keys.push_back(key); }
  [[nodiscard]] Status EndRow() {
    if (++rows_ == batch_size_) return Flush();
    return Status::Ok();
  }
  [[nodiscard]] Status Flush() {
    if (rows_ == 0) return Status::Ok();
    batch_.clock = static_cast<Clock>(writer_->totals().batches);
    STRATA_RETURN_IF_ERROR(writer_->Append(batch_));
    for (auto& t : batch_.tables) t.keys.clear();
    rows_ = 0;
    return Status::Ok();
  }

 private:
  TraceWriter* writer_;
  const uint32_t batch_size_;
  TraceBatch batch_;
  uint32_t rows_ = 0;
};

Status CheckBatchSize(uint32_t batch_size) {
  if (batch_size == 0 || batch_size > kBatchSizeMax) {
    return Status::InvalidArgument("--batch-size must be in [1, " + std::to_string(kBatchSizeMax) +
                                   "]");
  }
  return Status::Ok();
}

}  // namespace

Status CheckTraceOutput(const std::string& option, const std::string& output,
                        const std::string& input) {
  STRATA_RETURN_IF_ERROR(base::CheckOutputFile(option, output));
  for (const std::string& written : {output, output + ".tmp"}) {
    STRATA_ASSIGN_OR_RETURN(const bool same, base::SameFile(input, written));
    if (same) {
      const std::string which = written == output ? "" : "its temporary file " + written + " ";
      return Status::InvalidArgument(option + " " + output + ": " + which + "is the input file " +
                                     input + "; the trace would replace it");
    }
  }
  return Status::Ok();
}

Key HashFeature(uint32_t column, const char* value, size_t len) {
  return XXH64(value, len, kFeatureSeed + column);
}

Result<TraceTotals> ImportCriteo(const std::string& input, const std::string& output,
                                 const ImportOptions& options) {
  STRATA_RETURN_IF_ERROR(CheckBatchSize(options.batch_size));
  STRATA_RETURN_IF_ERROR(CheckTraceOutput("--out", output, input));
  LineReader lines(input);
  STRATA_RETURN_IF_ERROR(lines.Open());
  TraceHeader header;
  for (uint32_t c = 0; c < kCriteoCategoricals; ++c) {
    header.tables.push_back({"C" + std::to_string(c + 1), 0});
  }
  STRATA_ASSIGN_OR_RETURN(auto writer, TraceWriter::Create(output, header));
  Batcher batcher(writer.get(), kCriteoCategoricals, options.batch_size);
  std::vector<std::string_view> fields;
  std::string_view line;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(bool more, lines.Next(&line));
    if (!more) break;
    Split(line, '\t', &fields);
    if (fields.size() != kCriteoFields) {
      return lines.Error("expected " + std::to_string(kCriteoFields) +
                         " tab-separated fields (label, I1..I13, C1..C26), got " +
                         std::to_string(fields.size()));
    }
    for (uint32_t c = 0; c < kCriteoCategoricals; ++c) {
      const std::string_view v = fields[kCriteoFirstCategorical + c];
      if (!v.empty()) batcher.Add(c, HashFeature(c, v.data(), v.size()));
    }
    STRATA_RETURN_IF_ERROR(batcher.EndRow());
  }
  STRATA_RETURN_IF_ERROR(batcher.Flush());
  STRATA_RETURN_IF_ERROR(writer->Finish());
  return writer->totals();
}

Result<TraceTotals> ImportCsv(const std::string& input, const std::string& output,
                              const ImportOptions& options) {
  STRATA_RETURN_IF_ERROR(CheckBatchSize(options.batch_size));
  if (options.delimiter == '"') {
    return Status::InvalidArgument("--delimiter '\"': a quote opens a quoted field");
  }
  STRATA_RETURN_IF_ERROR(CheckTraceOutput("--out", output, input));
  LineReader lines(input);
  STRATA_RETURN_IF_ERROR(lines.Open());
  std::string_view line;
  STRATA_ASSIGN_OR_RETURN(bool has_header, lines.Next(&line));
  if (!has_header) return Status::InvalidArgument(input + ": empty file, expected a header row");
  std::vector<std::string> fields;
  if (Status s = SplitCsvLine(line, options.delimiter, &fields); !s.ok()) {
    return lines.Error(s.message());
  }
  if (fields.size() > kCsvColumnsMax) return lines.Error("too many columns");
  const std::vector<std::string> names(fields.begin(), fields.end());
  auto find = [&](const std::string& name) -> int64_t {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return static_cast<int64_t>(i);
    }
    return -1;
  };
  int64_t label = -1;
  if (!options.label.empty()) {
    label = find(options.label);
    if (label < 0) return lines.Error("--label column '" + options.label + "' not in the header");
  }
  std::vector<size_t> columns;  // table t reads field columns[t]
  if (options.columns.empty()) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (static_cast<int64_t>(i) != label) columns.push_back(i);
    }
  } else {
    for (const auto& name : options.columns) {
      const int64_t i = find(name);
      if (i < 0) return lines.Error("--columns: column '" + name + "' not in the header");
      if (i == label) return lines.Error("--columns: '" + name + "' is the label column");
      columns.push_back(static_cast<size_t>(i));
    }
  }
  if (columns.empty()) return lines.Error("no categorical columns to import");
  for (size_t c : columns) {  // each becomes a table, named after its column
    // The store's rule, so that replay and train take every imported trace.
    if (!IsValidTableName(names[c])) {
      return lines.Error("column " + std::to_string(c + 1) + ": '" + names[c] +
                         "' is not a table name (1 to " + std::to_string(kTableNameBytesMax) +
                         " characters of [A-Za-z0-9_.-])");
    }
  }
  TraceHeader header;
  for (size_t c : columns) header.tables.push_back({names[c], 0});
  STRATA_ASSIGN_OR_RETURN(auto writer, TraceWriter::Create(output, header));
  Batcher batcher(writer.get(), columns.size(), options.batch_size);
  while (true) {
    STRATA_ASSIGN_OR_RETURN(bool more, lines.Next(&line));
    if (!more) break;
    if (line.empty()) continue;
    if (Status s = SplitCsvLine(line, options.delimiter, &fields); !s.ok()) {
      return lines.Error(s.message());
    }
    if (fields.size() != names.size()) {
      return lines.Error("expected " + std::to_string(names.size()) + " fields, got " +
                         std::to_string(fields.size()));
    }
    for (size_t t = 0; t < columns.size(); ++t) {
      const std::string& v = fields[columns[t]];
      if (!v.empty()) batcher.Add(t, HashFeature(static_cast<uint32_t>(t), v.data(), v.size()));
    }
    STRATA_RETURN_IF_ERROR(batcher.EndRow());
  }
  STRATA_RETURN_IF_ERROR(batcher.Flush());
  STRATA_RETURN_IF_ERROR(writer->Finish());
  return writer->totals();
}

Result<TraceTotals> ImportLines(const std::string& input, const std::string& output) {
  STRATA_RETURN_IF_ERROR(CheckTraceOutput("--out", output, input));
  LineReader lines(input);
  STRATA_RETURN_IF_ERROR(lines.Open());
  TraceHeader header;
  header.tables.push_back({"keys", 0});
  STRATA_ASSIGN_OR_RETURN(auto writer, TraceWriter::Create(output, header));
  TraceBatch batch;
  batch.tables.resize(1);
  std::string_view line;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(bool more, lines.Next(&line));
    if (!more) break;
    auto& keys = batch.tables[0].keys;
    keys.clear();
    size_t i = 0;
    while (i < line.size()) {
      if (line[i] == ' ' || line[i] == '\t') {
        ++i;
        continue;
      }
      const size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
      // The whole token must be digits: from_chars, unlike strtoull on a
      // C string, does not stop silently at a NUL byte inside the line.
      const std::string_view token = line.substr(start, i - start);
      uint64_t v = 0;
      const auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), v);
      if (error != std::errc() || end != token.data() + token.size()) {
        return lines.Error("column " + std::to_string(start + 1) + ": '" + std::string(token) +
                           "' is not a decimal key in [0, 2^64-1]");
      }
      keys.push_back(static_cast<Key>(v));
    }
    batch.clock = static_cast<Clock>(writer->totals().batches);
    STRATA_RETURN_IF_ERROR(writer->Append(batch));
  }
  STRATA_RETURN_IF_ERROR(writer->Finish());
  return writer->totals();
}

Status ExportLines(const std::string& trace_path, int64_t table, std::FILE* out) {
  STRATA_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace_path));
  if (table >= static_cast<int64_t>(reader->header().tables.size())) {
    return Status::InvalidArgument("--table " + std::to_string(table) + ": the trace has " +
                                   std::to_string(reader->header().tables.size()) + " tables");
  }
  TraceBatch batch;
  std::string line;
  char num[32];
  while (true) {
    STRATA_ASSIGN_OR_RETURN(bool more, reader->Next(&batch));
    if (!more) break;
    line.clear();
    for (const auto& t : batch.tables) {
      if (table >= 0 && t.table != static_cast<TableId>(table)) continue;
      for (Key k : t.keys) {
        if (!line.empty()) line += ' ';
        const int n = std::snprintf(num, sizeof(num), "%" PRIu64, k);
        line.append(num, static_cast<size_t>(n));
      }
    }
    line += '\n';
    if (std::fwrite(line.data(), 1, line.size(), out) != line.size()) {
      return Status::FromErrno(errno, "export: write");
    }
  }
  return Status::Ok();
}

}  // namespace strata::trace
