// strata-test-labels: unit
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "strata/trace.h"
#include "tests/trace/test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::trace {
namespace {

using strata::testing::ScratchDir;
using testing::ReadBytes;
using testing::WriteBytes;

TraceHeader TwoTables() {
  TraceHeader h;
  h.worker_count = 2;
  h.tables = {{"users", 1000}, {"ads", 0}};
  return h;
}

std::vector<TraceBatch> SomeBatches() {
  std::vector<TraceBatch> batches;
  std::mt19937_64 rng(7);
  for (int b = 0; b < 5; ++b) {
    TraceBatch batch;
    batch.worker = static_cast<WorkerId>(b % 2);
    batch.clock = b / 2;
    if (b != 3) batch.tables.push_back({0, {0, ~Key{0}, 42, 42}});
    TraceBatchTable ads{1, {}};
    for (int i = 0; i < b * 3; ++i) ads.keys.push_back(rng());
    batch.tables.push_back(ads);
    batches.push_back(batch);
  }
  return batches;
}

void WriteTrace(const std::string& path, const std::vector<TraceBatch>& batches) {
  auto w = TraceWriter::Create(path, TwoTables());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (const auto& b : batches) ASSERT_TRUE((*w)->Append(b).ok());
  ASSERT_TRUE((*w)->Finish().ok());
}

// Reads the whole trace; the first error, or OK.
Status ReadAll(const std::string& path, std::vector<TraceBatch>* out = nullptr) {
  return ForEachBatch(path, [&](const TraceBatch& b) {
    if (out != nullptr) out->push_back(b);
    return Status::Ok();
  });
}

TEST(TraceFormatTest, RoundTripKeepsEveryField) {
  ScratchDir dir;
  const auto batches = SomeBatches();
  WriteTrace(dir.File("t.trace"), batches);
  auto r = TraceReader::Open(dir.File("t.trace"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->header().worker_count, 2u);
  ASSERT_EQ((*r)->header().tables.size(), 2u);
  EXPECT_EQ((*r)->header().tables[0].name, "users");
  EXPECT_EQ((*r)->header().tables[0].key_space, 1000u);
  for (int pass = 0; pass < 2; ++pass) {  // second pass after Rewind
    TraceBatch got;
    for (const auto& want : batches) {
      auto more = (*r)->Next(&got);
      ASSERT_TRUE(more.ok()) << more.status().ToString();
      ASSERT_TRUE(*more);
      EXPECT_EQ(got.worker, want.worker);
      EXPECT_EQ(got.clock, want.clock);
      ASSERT_EQ(got.tables.size(), want.tables.size());
      for (size_t t = 0; t < want.tables.size(); ++t) {
        EXPECT_EQ(got.tables[t].table, want.tables[t].table);
        EXPECT_EQ(got.tables[t].keys, want.tables[t].keys);
      }
    }
    auto more = (*r)->Next(&got);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    EXPECT_FALSE(*more);
    EXPECT_EQ((*r)->totals().batches, 5u);
    ASSERT_TRUE((*r)->Rewind().ok());
  }
}

TEST(TraceFormatTest, EveryFlippedByteIsDetected) {
  ScratchDir dir;
  WriteTrace(dir.File("t.trace"), SomeBatches());
  const auto bytes = ReadBytes(dir.File("t.trace"));
  ASSERT_GT(bytes.size(), 200u);
  for (size_t at = 0; at < bytes.size(); ++at) {
    auto damaged = bytes;
    damaged[at] ^= 0x20;
    WriteBytes(dir.File("bad.trace"), damaged, damaged.size());
    const Status s = ReadAll(dir.File("bad.trace"));
    ASSERT_TRUE(s.IsCorruption()) << "flip at " << at << ": " << s.ToString();
    EXPECT_NE(s.message().find("byte offset"), std::string::npos) << s.ToString();
  }
}

TEST(TraceFormatTest, EveryTruncationIsDetected) {
  ScratchDir dir;
  WriteTrace(dir.File("t.trace"), SomeBatches());
  const auto bytes = ReadBytes(dir.File("t.trace"));
  for (size_t len = 0; len < bytes.size(); ++len) {
    WriteBytes(dir.File("cut.trace"), bytes, len);
    const Status s = ReadAll(dir.File("cut.trace"));
    ASSERT_TRUE(s.IsCorruption()) << "cut at " << len << ": " << s.ToString();
  }
  EXPECT_TRUE(ReadAll(dir.File("t.trace")).ok());
}

TEST(TraceFormatTest, ErrorNamesTheDamagedRecordOffset) {
  ScratchDir dir;
  WriteTrace(dir.File("t.trace"), SomeBatches());
  auto r = TraceReader::Open(dir.File("t.trace"));
  ASSERT_TRUE(r.ok());
  TraceBatch b;
  ASSERT_TRUE(*(*r)->Next(&b));
  const uint64_t second = (*r)->offset();
  auto bytes = ReadBytes(dir.File("t.trace"));
  bytes[second + kRecordPrefixBytes + kBatchPayloadFixedBytes + 9] ^= 1;  // a key byte
  WriteBytes(dir.File("bad.trace"), bytes, bytes.size());
  const Status s = ReadAll(dir.File("bad.trace"));
  EXPECT_NE(s.message().find("byte offset " + std::to_string(second) + ": record checksum"),
            std::string::npos)
      << s.ToString();
  // Cut at the start of a record: no end record.
  WriteBytes(dir.File("cut.trace"), bytes, second);
  const Status cut = ReadAll(dir.File("cut.trace"));
  EXPECT_NE(cut.message().find("byte offset " + std::to_string(second) + ": truncated"),
            std::string::npos)
      << cut.ToString();
}

TEST(TraceFormatTest, DataAfterTheEndRecordIsRejected) {
  ScratchDir dir;
  WriteTrace(dir.File("t.trace"), SomeBatches());
  auto bytes = ReadBytes(dir.File("t.trace"));
  const size_t size = bytes.size();
  bytes.push_back(0);
  WriteBytes(dir.File("long.trace"), bytes, bytes.size());
  const Status s = ReadAll(dir.File("long.trace"));
  EXPECT_NE(s.message().find("byte offset " + std::to_string(size) + ": data after"),
            std::string::npos)
      << s.ToString();
}

TEST(TraceFormatTest, MissingFileAndForeignFile) {
  ScratchDir dir;
  EXPECT_TRUE(TraceReader::Open(dir.File("none")).status().IsNotFound());
  testing::WriteText(dir.File("text"), std::string(100, 'x'));
  const Status s = TraceReader::Open(dir.File("text")).status();
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("bad magic"), std::string::npos);
}

TEST(TraceFormatTest, WriterRejectsBadBatchesAndLeavesNoPartialFile) {
  ScratchDir dir;
  {
    auto w = TraceWriter::Create(dir.File("t.trace"), TwoTables());
    ASSERT_TRUE(w.ok());
    TraceBatch b;
    b.tables = {{1, {1}}, {0, {2}}};  // decreasing ids
    EXPECT_TRUE((*w)->Append(b).IsInvalidArgument());
    b.tables = {{2, {1}}};  // unknown table
    EXPECT_TRUE((*w)->Append(b).IsInvalidArgument());
    b.tables = {{0, {1}}};
    b.worker = 2;  // worker_count is 2
    EXPECT_TRUE((*w)->Append(b).IsInvalidArgument());
    b.worker = 1;
    EXPECT_TRUE((*w)->Append(b).ok());
    EXPECT_EQ((*w)->totals().batches, 1u);
    // Abandoned without Finish.
  }
  EXPECT_FALSE(std::filesystem::exists(dir.File("t.trace")));
  EXPECT_FALSE(std::filesystem::exists(dir.File("t.trace.tmp")));
  TraceHeader none;
  EXPECT_TRUE(TraceWriter::Create(dir.File("x"), none).status().IsInvalidArgument());
}

TEST(TraceFormatTest, EmptyTraceRoundTrips) {
  ScratchDir dir;
  WriteTrace(dir.File("t.trace"), {});
  std::vector<TraceBatch> got;
  EXPECT_TRUE(ReadAll(dir.File("t.trace"), &got).ok());
  EXPECT_TRUE(got.empty());
}

}  // namespace
}  // namespace strata::trace
