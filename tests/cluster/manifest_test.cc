// The cluster's MPI-free parts: the CLUSTER manifest and CLUSTER_SHARD record
// (cluster/manifest.h), the ownership function and the key router.
#include "cluster/manifest.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>

#include "cluster/key_router.h"
#include "cluster/shard_backup.h"
#include "strata/cluster_owner.h"
#include "tests/util/scratch_dir.h"

namespace strata::cluster {
namespace {

ClusterManifest Sample() {
  ClusterManifest m;
  m.world_size = 3;
  m.ownership = kClusterOwnershipName;
  m.generation = 7;
  m.rank_generations = {7, 7, 7};
  m.ssd_backend = SsdBackend::kRocksDb;
  m.tables = {{"ads", 16, Optimizer::kAdagrad}, {"user.v2", 8, Optimizer::kFtrl}};
  return m;
}

TEST(ClusterManifestTest, RoundTripsThroughAnAtomicFile) {
  strata::testing::ScratchDir dir;
  io::Env* env = io::Env::Default();
  ASSERT_TRUE(env->WriteFileAtomically(dir.path(), kManifestName,
                                       std::string(kManifestName) + ".tmp",
                                       EncodeClusterManifest(Sample()))
                  .ok());
  auto text = ReadSmallFile(env, dir.path(), kManifestName);
  ASSERT_TRUE(text.ok() && text->has_value());
  auto m = DecodeClusterManifest(**text, "CLUSTER");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->world_size, 3u);
  EXPECT_EQ(m->ownership, kClusterOwnershipName);
  EXPECT_EQ(m->generation, 7u);
  EXPECT_EQ(m->rank_generations, (std::vector<uint64_t>{7, 7, 7}));
  EXPECT_EQ(m->version, kManifestVersion);
  EXPECT_EQ(m->ssd_backend, SsdBackend::kRocksDb);
  ASSERT_EQ(m->tables.size(), 2u);
  EXPECT_EQ(m->tables[1].name, "user.v2");
  EXPECT_EQ(m->tables[1].dim, 8u);
  EXPECT_EQ(m->tables[1].optimizer, Optimizer::kFtrl);
  auto missing = ReadSmallFile(env, dir.path(), "NOPE");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TEST(ClusterManifestTest, EveryChangedByteIsCorruptionNamingTheFile) {
  const std::string good = EncodeClusterManifest(Sample());
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = bad[i] == '1' ? '2' : '1';
    auto m = DecodeClusterManifest(bad, "dir/CLUSTER");
    ASSERT_FALSE(m.ok()) << "byte " << i;
    EXPECT_TRUE(m.status().IsCorruption()) << m.status().ToString();
    EXPECT_NE(m.status().message().find("dir/CLUSTER"), std::string::npos);
  }
  EXPECT_FALSE(DecodeClusterManifest(good.substr(0, good.size() / 2), "CLUSTER").ok());
  EXPECT_FALSE(DecodeClusterManifest("", "CLUSTER").ok());
}

// A version-1 manifest (written before the tables were recorded) still
// decodes, with no tables; a version this build does not know is refused.
TEST(ClusterManifestTest, VersionOneDecodesWithoutTables) {
  const std::string v1_body =
      "strata-cluster-manifest 1\nworld_size 2\nownership x\ngeneration 3\n"
      "rank_generation 3\nrank_generation 3\n";
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(XXH64(v1_body.data(), v1_body.size(), 0)));
  auto m = DecodeClusterManifest(v1_body + "checksum " + hex + "\n", "CLUSTER");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->version, 1u);
  EXPECT_TRUE(m->tables.empty());
  std::string v9 = EncodeClusterManifest(Sample());
  v9.replace(v9.find(" 2\n"), 3, " 9\n");
  const std::string body = v9.substr(0, v9.rfind("checksum "));
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(XXH64(body.data(), body.size(), 0)));
  auto bad = DecodeClusterManifest(body + "checksum " + hex + "\n", "CLUSTER");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("version 9"), std::string::npos) << bad.status().ToString();
}

// A shard's kept copy: whole only once its marker is written; a restore
// swaps it in; a restore a crash cut between its renames is finished.
TEST(ShardBackupTest, CopyRestoreAndAnInterruptedRestore) {
  strata::testing::ScratchDir dir;
  io::Env* env = io::Env::Default();
  const std::string shard = ShardDir(dir.path(), 1);
  ASSERT_TRUE(env->CreateDirs(shard + "/sub").ok());
  ASSERT_TRUE(env->WriteFileAtomically(shard, "data", "data.tmp", "generation-4").ok());
  ASSERT_TRUE(env->WriteFileAtomically(shard + "/sub", "more", "more.tmp", "deep").ok());
  ASSERT_TRUE(env->CreateDirs(shard + "/live").ok());  // RocksDB's live/: not copied
  auto none = BackupGeneration(env, dir.path(), 1);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(BackupShard(env, dir.path(), 1, 3, 4).ok());
  auto kept = BackupGeneration(env, dir.path(), 1);
  ASSERT_TRUE(kept.ok() && kept->has_value());
  EXPECT_EQ(**kept, 4u);
  EXPECT_FALSE(std::filesystem::exists(BackupDir(dir.path(), 1) + "/live"));
  // The shard moves on; a second backup of generation 4 keeps the first.
  ASSERT_TRUE(env->WriteFileAtomically(shard, "data", "data.tmp", "generation-5").ok());
  ASSERT_TRUE(BackupShard(env, dir.path(), 1, 3, 4).ok());
  ASSERT_TRUE(RestoreShard(env, dir.path(), 1).ok());
  auto data = ReadSmallFile(env, shard, "data");
  ASSERT_TRUE(data.ok() && data->has_value());
  EXPECT_EQ(**data, "generation-4");
  auto more = ReadSmallFile(env, shard + "/sub", "more");
  ASSERT_TRUE(more.ok() && more->has_value());
  EXPECT_EQ(**more, "deep");
  EXPECT_FALSE(std::filesystem::exists(BackupDir(dir.path(), 1)));
  // A restore cut after its first rename: the next Open finishes it.
  ASSERT_TRUE(env->WriteFileAtomically(shard, "data", "data.tmp", "generation-5").ok());
  ASSERT_TRUE(BackupShard(env, dir.path(), 1, 3, 5).ok());
  ASSERT_TRUE(env->WriteFileAtomically(shard, "data", "data.tmp", "generation-6").ok());
  ASSERT_TRUE(env->RenameFile(shard, shard + ".discard").ok());
  ASSERT_TRUE(FinishInterrupted(env, dir.path(), 1).ok());
  data = ReadSmallFile(env, shard, "data");
  ASSERT_TRUE(data.ok() && data->has_value());
  EXPECT_EQ(**data, "generation-5");
  EXPECT_FALSE(std::filesystem::exists(shard + ".discard"));
  // Dropping the copy deletes it.
  ASSERT_TRUE(BackupShard(env, dir.path(), 1, 3, 5).ok());
  ASSERT_TRUE(DropBackup(env, dir.path(), 1).ok());
  EXPECT_FALSE(std::filesystem::exists(BackupDir(dir.path(), 1)));
}

TEST(ClusterManifestTest, ShardRecordRoundTripsAndIsNotAManifest) {
  ShardRecord r;
  r.rank = 2;
  r.world_size = 4;
  r.generation = 5;
  r.pending = 6;
  const std::string text = EncodeShardRecord(r);
  auto back = DecodeShardRecord(text, "CLUSTER_SHARD");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->rank, 2u);
  EXPECT_EQ(back->world_size, 4u);
  EXPECT_EQ(back->generation, 5u);
  EXPECT_EQ(back->pending, 6u);
  auto wrong = DecodeClusterManifest(text, "CLUSTER");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("not a strata-cluster-manifest"), std::string::npos);
}

TEST(ClusterOwnerTest, SpreadsKeysEvenlyAndDependsOnTheTable) {
  for (uint32_t world : {1u, 2u, 3u, 4u, 7u}) {
    std::vector<uint64_t> per_rank(world, 0);
    for (Key k = 0; k < 70000; ++k) ++per_rank[ClusterOwner(0, k, world)];
    for (uint64_t n : per_rank) EXPECT_NEAR(double(n), 70000.0 / world, 70000.0 / world * 0.05);
  }
  EXPECT_LT(ClusterOwner(0, kKeyMax, 4), 4u);
  int differ = 0;
  for (Key k = 0; k < 1000; ++k) differ += ClusterOwner(0, k, 4) != ClusterOwner(1, k, 4);
  EXPECT_GT(differ, 600);  // about 3/4 of keys live elsewhere in another table
}

TEST(KeyRouterTest, GroupsDistinctKeysByOwnerAndMapsEveryKey) {
  KeyRouter router;
  for (int round = 0; round < 3; ++round) {  // scratch reused across calls
    std::vector<Key> keys;
    for (Key k = 0; k < 500; ++k) keys.push_back((k * 7919 + round) % 200);
    keys.push_back(kKeyMax);
    keys.push_back(0);
    router.Route(1, keys, 3);
    const auto grouped = router.grouped();
    const auto counts = router.counts();
    ASSERT_EQ(counts.size(), 3u);
    size_t at = 0;
    std::map<Key, int> seen;
    for (int r = 0; r < 3; ++r) {
      for (int i = 0; i < counts[r]; ++i, ++at) {
        EXPECT_EQ(ClusterOwner(1, grouped[at], 3), uint32_t(r));
        EXPECT_EQ(seen[grouped[at]]++, 0) << "key " << grouped[at] << " twice";
      }
    }
    EXPECT_EQ(at, grouped.size());
    EXPECT_EQ(grouped.size(), 201u);
    for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(grouped[router.slots()[i]], keys[i]);
  }
}

}  // namespace
}  // namespace strata::cluster
