// The cluster manifest and the shard record (manifest.h, docs/cluster.md).
#include "cluster/manifest.h"

#include <xxhash.h>

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <utility>

namespace strata::cluster {
namespace {

constexpr const char* kManifestMagic = "strata-cluster-manifest";
constexpr const char* kShardMagic = "strata-cluster-shard";
constexpr size_t kSmallFileBytesMax = size_t{1} << 24;  // a manifest of kWorldSizeMax ranks fits

struct Field {
  std::string name;
  std::string value;
  size_t line = 0;  // 1-based, for messages
};

Status Bad(const std::string& path, size_t line, const std::string& what) {
  return Status::Corruption(path + ": line " + std::to_string(line) + ": " + what);
}

std::string ChecksumLine(const std::string& body) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, XXH64(body.data(), body.size(), 0));
  return std::string("checksum ") + hex + "\n";
}

std::string Seal(const std::string& body) { return body + ChecksumLine(body); }

// The fields after the magic line, once the checksum and the version (from
// 1 to `version_max`) check out; *version gets it.
Result<std::vector<Field>> Unseal(const std::string& text, const std::string& path,
                                  const char* magic, uint32_t version_max, uint32_t* version) {
  const size_t last = text.rfind("checksum ");
  if (last == std::string::npos || (last != 0 && text[last - 1] != '\n')) {
    return Bad(path, 0, "no checksum line (truncated?)");
  }
  const std::string body = text.substr(0, last);
  if (text.substr(last) != ChecksumLine(body)) return Bad(path, 0, "checksum mismatch");
  std::vector<Field> fields;
  size_t pos = 0;
  size_t line = 0;
  while (pos < body.size()) {
    const size_t end = body.find('\n', pos);
    const std::string text_line = body.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    const size_t space = text_line.find(' ');
    if (space == std::string::npos) return Bad(path, line, "not '<field> <value>'");
    fields.push_back({text_line.substr(0, space), text_line.substr(space + 1), line});
  }
  if (fields.empty() || fields[0].name != magic) {
    return Bad(path, 1, std::string("not a ") + magic + " file");
  }
  *version = 0;
  for (uint32_t v = 1; v <= version_max; ++v) {
    if (fields[0].value == std::to_string(v)) *version = v;
  }
  if (*version == 0) {
    return Bad(
        path, 1,
        "version " + fields[0].value + ", this build reads 1 to " + std::to_string(version_max));
  }
  fields.erase(fields.begin());
  return fields;
}

// Takes the next field, which must be `name`, as a number no larger than `max`.
Result<uint64_t> TakeNumber(const std::vector<Field>& fields, size_t* next, const char* name,
                            uint64_t max, const std::string& path) {
  if (*next >= fields.size()) return Bad(path, 0, std::string("missing field '") + name + "'");
  const Field& f = fields[(*next)++];
  if (f.name != name) {
    return Bad(path, f.line, "field '" + f.name + "', expected '" + name + "'");
  }
  uint64_t v = 0;
  const char* end = f.value.data() + f.value.size();
  auto [ptr, ec] = std::from_chars(f.value.data(), end, v);
  if (ec != std::errc() || ptr != end || v > max) {
    return Bad(path, f.line, std::string("bad ") + name + " '" + f.value + "'");
  }
  return v;
}

// Version 2's backend and tables, from fields[*next] on.
Status DecodeTables(const std::vector<Field>& fields, size_t* next, const std::string& path,
                    ClusterManifest* m) {
  if (*next >= fields.size() || fields[*next].name != "ssd_backend") {
    return Bad(path, 0, "missing field 'ssd_backend'");
  }
  const Field& backend = fields[(*next)++];
  if (backend.value != "native" && backend.value != "rocksdb") {
    return Bad(path, backend.line, "bad ssd_backend '" + backend.value + "'");
  }
  m->ssd_backend = backend.value == "rocksdb" ? SsdBackend::kRocksDb : SsdBackend::kNative;
  STRATA_ASSIGN_OR_RETURN(uint64_t n, TakeNumber(fields, next, "tables", kTablesMax, path));
  for (uint64_t i = 0; i < n; ++i) {
    if (*next >= fields.size() || fields[*next].name != "table") {
      return Bad(path, 0, "missing field 'table'");
    }
    const Field& f = fields[(*next)++];
    ManifestTable t;
    unsigned dim = 0;
    int optimizer = -1;
    int name_at = 0;
    if (std::sscanf(f.value.c_str(), "%u %d %n", &dim, &optimizer, &name_at) != 2 || name_at == 0 ||
        static_cast<size_t>(name_at) >= f.value.size() || dim == 0 || dim > kTableDimMax ||
        optimizer < 0 || optimizer > static_cast<int>(Optimizer::kFtrl)) {
      return Bad(path, f.line, "bad table '" + f.value + "'");
    }
    t.dim = dim;
    t.optimizer = static_cast<Optimizer>(optimizer);
    t.name = f.value.substr(name_at);
    m->tables.push_back(std::move(t));
  }
  return Status::Ok();
}

}  // namespace

std::string ShardDir(const std::string& dir, uint32_t rank) {
  return dir + "/rank-" + std::to_string(rank);
}

std::string EncodeClusterManifest(const ClusterManifest& m) {
  std::string out = std::string(kManifestMagic) + " " + std::to_string(kManifestVersion) + "\n";
  out += "world_size " + std::to_string(m.world_size) + "\n";
  out += "ownership " + m.ownership + "\n";
  out += "generation " + std::to_string(m.generation) + "\n";
  for (uint64_t g : m.rank_generations) out += "rank_generation " + std::to_string(g) + "\n";
  out += std::string("ssd_backend ") +
         (m.ssd_backend == SsdBackend::kRocksDb ? "rocksdb" : "native") + "\n";
  out += "tables " + std::to_string(m.tables.size()) + "\n";
  // The name last: it may hold spaces.
  for (const ManifestTable& t : m.tables) {
    out += "table " + std::to_string(t.dim) + " " + std::to_string(static_cast<int>(t.optimizer)) +
           " " + t.name + "\n";
  }
  return Seal(out);
}

Result<ClusterManifest> DecodeClusterManifest(const std::string& text, const std::string& path) {
  ClusterManifest m;
  STRATA_ASSIGN_OR_RETURN(std::vector<Field> fields,
                          Unseal(text, path, kManifestMagic, kManifestVersion, &m.version));
  size_t next = 0;
  STRATA_ASSIGN_OR_RETURN(uint64_t world,
                          TakeNumber(fields, &next, "world_size", kWorldSizeMax, path));
  if (world == 0) return Bad(path, fields[0].line, "world_size 0");
  m.world_size = static_cast<uint32_t>(world);
  if (next >= fields.size() || fields[next].name != "ownership") {
    return Bad(path, 0, "missing field 'ownership'");
  }
  m.ownership = fields[next++].value;
  STRATA_ASSIGN_OR_RETURN(m.generation, TakeNumber(fields, &next, "generation", UINT64_MAX, path));
  for (uint32_t r = 0; r < m.world_size; ++r) {
    STRATA_ASSIGN_OR_RETURN(uint64_t g,
                            TakeNumber(fields, &next, "rank_generation", UINT64_MAX, path));
    m.rank_generations.push_back(g);
  }
  if (m.version >= 2) STRATA_RETURN_IF_ERROR(DecodeTables(fields, &next, path, &m));
  if (next != fields.size()) return Bad(path, fields[next].line, "unexpected field");
  return m;
}

std::string EncodeShardRecord(const ShardRecord& r) {
  std::string out = std::string(kShardMagic) + " " + std::to_string(kShardRecordVersion) + "\n";
  out += "rank " + std::to_string(r.rank) + "\n";
  out += "world_size " + std::to_string(r.world_size) + "\n";
  out += "generation " + std::to_string(r.generation) + "\n";
  out += "pending " + std::to_string(r.pending) + "\n";
  return Seal(out);
}

Result<ShardRecord> DecodeShardRecord(const std::string& text, const std::string& path) {
  uint32_t version = 0;
  STRATA_ASSIGN_OR_RETURN(std::vector<Field> fields,
                          Unseal(text, path, kShardMagic, kShardRecordVersion, &version));
  ShardRecord r;
  size_t next = 0;
  STRATA_ASSIGN_OR_RETURN(uint64_t rank, TakeNumber(fields, &next, "rank", kWorldSizeMax, path));
  STRATA_ASSIGN_OR_RETURN(uint64_t world,
                          TakeNumber(fields, &next, "world_size", kWorldSizeMax, path));
  r.rank = static_cast<uint32_t>(rank);
  r.world_size = static_cast<uint32_t>(world);
  STRATA_ASSIGN_OR_RETURN(r.generation, TakeNumber(fields, &next, "generation", UINT64_MAX, path));
  STRATA_ASSIGN_OR_RETURN(r.pending, TakeNumber(fields, &next, "pending", UINT64_MAX, path));
  if (next != fields.size()) return Bad(path, fields[next].line, "unexpected field");
  return r;
}

Result<std::optional<std::string>> ReadSmallFile(io::Env* env, const std::string& dir,
                                                 const std::string& name) {
  const std::string path = dir + "/" + name;
  if (!env->FileExists(path)) return std::optional<std::string>();
  io::FileOptions options;
  options.read_only = true;
  STRATA_ASSIGN_OR_RETURN(auto file, env->OpenFile(path, options));
  STRATA_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  if (size > kSmallFileBytesMax) {
    return Status::Corruption(path + ": " + std::to_string(size) + " bytes, more than a " + name +
                              " file holds");
  }
  std::string bytes(size, '\0');
  size_t got = 0;
  STRATA_RETURN_IF_ERROR(file->Read(0, size, bytes.data(), &got));
  if (got != size) return Status::Corruption(path + ": short read");
  return std::optional<std::string>(std::move(bytes));
}

}  // namespace strata::cluster
