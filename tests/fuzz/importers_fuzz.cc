// Fuzz target: the text importers (trace/importers.cc).
//
// Input: one control byte, then the text file. Control bits 0-1 pick the
// importer (0 lines, 1 csv, 2 criteo, 3 lines), bits 2-3 the batch size (1,
// 2, 3 or 4096 rows), bit 4 the CSV delimiter (',' or '\t'), bit 5 a CSV
// label column named "label". Properties:
// - an import never crashes; a failure is InvalidArgument naming the input
//   file and a line (or the empty file), and leaves no trace behind;
// - a successful import is a trace the reader reads whole, with the totals
//   the importer returned, and batches of at most the batch size's rows;
// - lines: the trace holds exactly the keys of a reference parser here
//   (decimal tokens in [0, 2^64-1] split at spaces and tabs), and one batch
//   per line; the importer fails exactly when the reference refuses a token.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/assert.h"
#include "strata/trace.h"
#include "tests/fuzz/fuzz_util.h"
#include "trace/importers.h"
#include "trace/limits.h"

namespace strata::fuzz {
namespace {

// The lines format, parsed independently of the importer: the keys of each
// line, or nullopt when a token is not a decimal key or a line is too long.
std::optional<std::vector<std::vector<Key>>> ParseLines(const std::string& text) {
  std::vector<std::vector<Key>> lines;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    const size_t next = end == std::string::npos ? text.size() : end + 1;
    if (next - begin > trace::kImportLineBytesMax) return std::nullopt;
    if (end == std::string::npos) end = text.size();
    while (end > begin && (text[end - 1] == '\n' || text[end - 1] == '\r')) --end;
    std::vector<Key> keys;
    size_t i = begin;
    while (i < end) {
      if (text[i] == ' ' || text[i] == '\t') {
        ++i;
        continue;
      }
      unsigned __int128 v = 0;
      for (; i < end && text[i] != ' ' && text[i] != '\t'; ++i) {
        if (text[i] < '0' || text[i] > '9') return std::nullopt;
        v = v * 10 + unsigned(text[i] - '0');
        if (v > ~uint64_t{0}) return std::nullopt;
      }
      keys.push_back(static_cast<Key>(v));
    }
    lines.push_back(std::move(keys));
    begin = next;
  }
  return lines;
}

void CheckImport(uint8_t control, const std::string& text) {
  const std::string input = ScratchPath("input.txt");
  const std::string output = ScratchPath("out.trace");
  WriteFile(input, text.data(), text.size());
  std::filesystem::remove(output);
  const uint32_t batch_sizes[4] = {1, 2, 3, 4096};
  trace::ImportOptions options;
  options.batch_size = batch_sizes[(control >> 2) & 3];
  options.delimiter = (control & 16) != 0 ? '\t' : ',';
  if ((control & 32) != 0) options.label = "label";
  const int importer = control & 3;
  Result<trace::TraceTotals> r = importer == 1   ? trace::ImportCsv(input, output, options)
                                 : importer == 2 ? trace::ImportCriteo(input, output, options)
                                                 : trace::ImportLines(input, output);
  if (!r.ok()) {
    CheckError(r.status(), StatusCode::kInvalidArgument, {input});
    STRATA_ASSERT(!std::filesystem::exists(output), "fuzz: a failed import left a trace");
    STRATA_ASSERT(!std::filesystem::exists(output + ".tmp"), "fuzz: a failed import left a .tmp");
    if (importer == 0 || importer == 3) {
      STRATA_ASSERT(!ParseLines(text).has_value(), "fuzz: lines import refused a valid file");
    }
    return;
  }
  std::vector<trace::TraceBatch> batches;
  const Status read = trace::ForEachBatch(output, [&](const trace::TraceBatch& b) {
    batches.push_back(b);
    return Status::Ok();
  });
  STRATA_ASSERT(read.ok(), "fuzz: an imported trace does not read back");
  uint64_t keys = 0;
  for (const auto& b : batches) keys += b.KeyCount();
  STRATA_ASSERT(r->batches == batches.size() && r->keys == keys, "fuzz: totals disagree");
  if (importer == 0 || importer == 3) {
    const auto expected = ParseLines(text);
    STRATA_ASSERT(expected.has_value(), "fuzz: lines import accepted a malformed token");
    STRATA_ASSERT(expected->size() == batches.size(), "fuzz: not one batch per line");
    for (size_t i = 0; i < batches.size(); ++i) {
      STRATA_ASSERT(batches[i].tables.size() == 1 && batches[i].tables[0].keys == (*expected)[i],
                    "fuzz: lines import keys differ from the reference parser");
    }
  } else {
    for (const auto& b : batches) {
      for (const auto& t : b.tables) {
        // Criteo and CSV add at most one key per row and table.
        STRATA_ASSERT(t.keys.size() <= options.batch_size, "fuzz: batch larger than batch_size");
      }
    }
  }
}

}  // namespace
}  // namespace strata::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  strata::fuzz::CheckImport(data[0],
                            std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  return 0;
}
