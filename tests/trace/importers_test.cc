// strata-test-labels: unit
#include "trace/importers.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "strata/options.h"
#include "tests/trace/test_util.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/source_files.h"
#include "trace/info.h"

namespace strata::trace {
namespace {

using strata::testing::ScratchDir;
using testing::WriteText;

std::vector<std::string> Fields(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, sep)) out.push_back(field);
  if (!line.empty() && line.back() == sep) out.push_back("");
  return out;
}

std::string ExportToString(const std::string& trace, int64_t table = -1) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* mem = open_memstream(&buf, &len);
  EXPECT_TRUE(ExportLines(trace, table, mem).ok());
  std::fclose(mem);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

TEST(ImportCriteoTest, ShippedSampleBecomesTwentySixTables) {
  // The sample ships in the repository: missing is a broken checkout, not a skip.
  const std::string sample = strata::testing::CriteoSamplePath();
  ASSERT_TRUE(std::filesystem::exists(sample))
      << "the shipped Criteo sample is missing: " << sample;
  // The model: count non-empty categorical values per column, and the keys
  // of the first row.
  std::ifstream in(sample);
  std::string line;
  std::vector<uint64_t> present(26, 0);
  std::vector<std::optional<Key>> first_row(26);  // by column; empty: missing
  uint64_t rows = 0;
  while (std::getline(in, line)) {
    const auto f = Fields(line, '\t');
    ASSERT_EQ(f.size(), 40u);
    for (uint32_t c = 0; c < 26; ++c) {
      if (f[14 + c].empty()) continue;
      present[c]++;
      if (rows == 0) first_row[c] = HashFeature(c, f[14 + c].data(), f[14 + c].size());
    }
    ++rows;
  }
  ASSERT_EQ(rows, 10000u);
  ScratchDir dir;
  ImportOptions o;
  o.batch_size = 1000;
  auto totals = ImportCriteo(sample, dir.File("c.trace"), o);
  ASSERT_TRUE(totals.ok()) << totals.status().ToString();
  EXPECT_EQ(totals->batches, 10u);
  auto info = ComputeTraceInfo(dir.File("c.trace"));
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->tables.size(), 26u);
  EXPECT_EQ(info->tables[0].name, "C1");
  for (uint32_t c = 0; c < 26; ++c) EXPECT_EQ(info->tables[c].keys, present[c]) << c;
  // First batch starts with the first row's value in each table.
  bool first = true;
  ASSERT_TRUE(ForEachBatch(dir.File("c.trace"), [&](const TraceBatch& b) {
                if (!first) return Status::Ok();
                first = false;
                EXPECT_EQ(b.tables.size(), 26u);
                for (const auto& t : b.tables) {
                  if (first_row[t.table]) EXPECT_EQ(t.keys.at(0), *first_row[t.table]) << t.table;
                }
                return Status::Ok();
              }).ok());
  // Skewed like the README says: the most used keys take a large share.
  EXPECT_GT(info->tables[0].top1_share, 0.3);
}

TEST(ImportCriteoTest, BadLineNamesItsNumberAndLeavesNoTrace) {
  ScratchDir dir;
  std::string good = "1";
  for (int i = 0; i < 39; ++i) good += "\tab";
  WriteText(dir.File("in.txt"), good + "\n" + good + "\n1\t2\t3\n");
  auto r = ImportCriteo(dir.File("in.txt"), dir.File("out"), ImportOptions{});
  ASSERT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("line 3"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(dir.File("out")));
}

TEST(ImportCsvTest, LabelSkippedColumnsChosenEmptyValuesSkipped) {
  ScratchDir dir;
  WriteText(dir.File("in.csv"), "label,user,ad,hour\n1,u1,a1,3\n0,u2,,4\n1,u1,a2,5\n");
  ImportOptions o;
  o.batch_size = 2;
  o.label = "label";
  o.columns = {"user", "ad"};
  auto r = ImportCsv(dir.File("in.csv"), dir.File("t"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batches, 2u);
  EXPECT_EQ(r->keys, 5u);
  auto info = ComputeTraceInfo(dir.File("t"));
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->tables.size(), 2u);
  EXPECT_EQ(info->tables[0].name, "user");
  EXPECT_EQ(info->tables[0].unique_keys, 2u);
  EXPECT_EQ(info->tables[1].keys, 2u);
  o.columns.clear();  // all but the label
  ASSERT_TRUE(ImportCsv(dir.File("in.csv"), dir.File("t2"), o).ok());
  EXPECT_EQ(ComputeTraceInfo(dir.File("t2"))->tables.size(), 3u);
  o.columns = {"nope"};
  auto bad = ImportCsv(dir.File("in.csv"), dir.File("t3"), o);
  EXPECT_NE(bad.status().message().find("'nope'"), std::string::npos);
}

// Quoted fields (trace/csv.h) hold the delimiter, in the header and the rows;
// the key is that of the unquoted text.
TEST(ImportCsvTest, QuotedFieldsHoldTheDelimiter) {
  ScratchDir dir;
  WriteText(dir.File("in.csv"), "user,\"ad\"\n\"u,1\",a1\nu2,\"a\"\"2\"\n");
  auto r = ImportCsv(dir.File("in.csv"), dir.File("t"), ImportOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->keys, 4u);
  auto info = ComputeTraceInfo(dir.File("t"));
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->tables.size(), 2u);
  EXPECT_EQ(info->tables[1].name, "ad");
  EXPECT_EQ(ExportToString(dir.File("t"), 0), std::to_string(HashFeature(0, "u,1", 3)) + " " +
                                                  std::to_string(HashFeature(0, "u2", 2)) + "\n");
  EXPECT_EQ(ExportToString(dir.File("t"), 1), std::to_string(HashFeature(1, "a1", 2)) + " " +
                                                  std::to_string(HashFeature(1, "a\"2", 3)) + "\n");
}

// A quote left open was read as part of the value before; now the import
// fails naming the file and the line, and writes no trace.
TEST(ImportCsvTest, UnterminatedQuoteNamesFileAndLineAndLeavesNoTrace) {
  ScratchDir dir;
  WriteText(dir.File("in.csv"), "user,ad\nu1,a1\nu2,\"a2\n");
  auto r = ImportCsv(dir.File("in.csv"), dir.File("t"), ImportOptions{});
  ASSERT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_NE(r.status().message().find(dir.File("in.csv") + " line 3: field 2: unterminated"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(dir.File("t")));
  WriteText(dir.File("header.csv"), "\"user,ad\nu1,a1\n");
  auto h = ImportCsv(dir.File("header.csv"), dir.File("t"), ImportOptions{});
  EXPECT_NE(h.status().message().find(dir.File("header.csv") + " line 1: field 1: unterminated"),
            std::string::npos)
      << h.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(dir.File("t")));
}

// Column names become table names: one the store refuses (not of
// [A-Za-z0-9_.-], or longer than kTableNameBytesMax) fails the import,
// naming the column, before the trace is written; replay and train then
// take every trace an import writes.
TEST(ImportCsvTest, ColumnNamesTheStoreRefusesFailBeforeTheTraceIsWritten) {
  ScratchDir dir;
  for (const std::string& name : {std::string("caf\xc3\xa9"), std::string(200, 'a'),
                                  std::string("a b"), std::string("a/b")}) {
    WriteText(dir.File("in.csv"), "user," + name + "\nu1,a1\n");
    auto r = ImportCsv(dir.File("in.csv"), dir.File("t"), ImportOptions{});
    ASSERT_TRUE(r.status().IsInvalidArgument()) << name << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find("column 2: '" + name + "' is not a table name"),
              std::string::npos)
        << r.status().ToString();
    EXPECT_FALSE(std::filesystem::exists(dir.File("t")));
  }
  WriteText(dir.File("in.csv"), "user," + std::string(kTableNameBytesMax, 'b') + "\nu1,a1\n");
  EXPECT_TRUE(ImportCsv(dir.File("in.csv"), dir.File("t"), ImportOptions{}).ok());
}

// An --out that names the input (spelled otherwise, a symbolic or a hard
// link, or the input being the trace's temporary file) replaced the input
// with the trace; now every importer refuses it before reading, and the
// input stays as it was.
TEST(ImportTest, OutputThatIsTheInputIsRefusedAndTheInputKept) {
  ScratchDir dir;
  const std::string input = dir.File("in.csv");
  const std::string text = "user,ad\nu1,a1\n";
  WriteText(input, text);
  std::filesystem::create_symlink(input, dir.File("soft"));
  std::filesystem::create_hard_link(input, dir.File("hard"));
  std::filesystem::create_directory(dir.File("sub"));
  for (const std::string& out :
       {input, dir.File("sub/../in.csv"), dir.File("soft"), dir.File("hard")}) {
    SCOPED_TRACE(out);
    for (const auto& status :
         {ImportCsv(input, out, ImportOptions{}).status(), ImportLines(input, out).status(),
          ImportCriteo(input, out, ImportOptions{}).status()}) {
      EXPECT_TRUE(status.IsInvalidArgument()) << status.ToString();
      EXPECT_NE(status.message().find("--out " + out + ": is the input file " + input),
                std::string::npos)
          << status.ToString();
    }
  }
  WriteText(dir.File("t.tmp"), text);
  const auto temp = ImportLines(dir.File("t.tmp"), dir.File("t")).status();
  EXPECT_NE(temp.message().find("its temporary file " + dir.File("t.tmp") + " is the input"),
            std::string::npos)
      << temp.ToString();
  const std::vector<char> bytes = testing::ReadBytes(input);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), text);
  EXPECT_EQ(testing::ReadBytes(dir.File("t.tmp")).size(), text.size());
  // An --out that is a directory, or in one that does not exist, fails
  // before the input is read (it failed after, at the rename).
  EXPECT_NE(ImportLines(input, dir.File("sub")).status().message().find("is a directory"),
            std::string::npos);
  EXPECT_NE(ImportLines(input, dir.File("none/t")).status().message().find("does not exist"),
            std::string::npos);
}

TEST(ImportLinesTest, RoundTripsThroughExport) {
  ScratchDir dir;
  const std::string text = "1 2 3\n18446744073709551615 0\n\n7 7 7\n";
  WriteText(dir.File("in.txt"), text);
  auto r = ImportLines(dir.File("in.txt"), dir.File("t"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batches, 4u);
  EXPECT_EQ(r->keys, 8u);
  EXPECT_EQ(ExportToString(dir.File("t")), text);
}

TEST(ImportLinesTest, BadTokenNamesLineAndColumn) {
  ScratchDir dir;
  WriteText(dir.File("a.txt"), "1 2\n3 x4\n");
  auto r = ImportLines(dir.File("a.txt"), dir.File("t"));
  EXPECT_NE(r.status().message().find("line 2: column 3"), std::string::npos)
      << r.status().ToString();
  WriteText(dir.File("b.txt"), "18446744073709551616\n");  // 2^64
  EXPECT_TRUE(ImportLines(dir.File("b.txt"), dir.File("t")).status().IsInvalidArgument());
  WriteText(dir.File("c.txt"), "-1\n");
  EXPECT_TRUE(ImportLines(dir.File("c.txt"), dir.File("t")).status().IsInvalidArgument());
  EXPECT_TRUE(ImportLines(dir.File("none"), dir.File("t")).status().IsNotFound());
}

TEST(TraceInfoTest, CountsMatchAModel) {
  ScratchDir dir;
  WriteText(dir.File("in.txt"), "5 5 5 5 1\n5 2\n3 4 5\n");
  ASSERT_TRUE(ImportLines(dir.File("in.txt"), dir.File("t")).ok());
  auto info = ComputeTraceInfo(dir.File("t"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->batches, 3u);
  EXPECT_EQ(info->keys, 10u);
  EXPECT_EQ(info->unique_keys, 5u);
  EXPECT_EQ(info->batch_rows_max, 3u);
  EXPECT_DOUBLE_EQ(info->batch_rows_mean, 7.0 / 3);
  EXPECT_EQ(info->tables[0].max_key_count, 6u);
  EXPECT_DOUBLE_EQ(info->tables[0].top1_share, 0.6);  // top 1% of 5 keys = 1 key
}

}  // namespace
}  // namespace strata::trace
