#include "storage/manifest.h"

#include <xxhash.h>

#include <bit>
#include <cstring>

#include "storage/limits.h"

namespace strata::storage {

static_assert(std::endian::native == std::endian::little, "format is little endian");

namespace {

template <typename T>
void Append(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Bounds-checked reader over the manifest bytes.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  template <typename T>
  Status Get(T* value, const char* what) {
    return GetBytes(value, sizeof(T), what);
  }
  Status GetBytes(void* out, size_t len, const char* what) {
    if (len > bytes_.size() - pos_) {
      return Status::Corruption(path_ + " offset " + std::to_string(pos_) + ": truncated " + what);
    }
    if (len > 0) std::memcpy(out, bytes_.data() + pos_, len);
    pos_ += len;
    return Status::Ok();
  }
  Status Fail(const std::string& what) const {
    return Status::Corruption(path_ + " offset " + std::to_string(pos_) + ": " + what);
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace

std::string EncodeManifest(const Manifest& m) {
  std::string body;
  body.append(reinterpret_cast<const char*>(m.meta.data()), m.meta.size());
  for (const ManifestTable& t : m.tables) {
    ssd::TableRecord r{};
    r.table_id = t.spec.id;
    r.row_bytes = t.spec.row_bytes;
    r.page_bytes = t.page_bytes;
    r.name_bytes = static_cast<uint32_t>(t.spec.name.size());
    r.file_number = t.file_number;
    r.row_count = t.row_count;
    r.leaf_count = t.leaves.size();
    Append(&body, r);
    body += t.spec.name;
    body.append(reinterpret_cast<const char*>(t.leaves.data()),
                t.leaves.size() * sizeof(ssd::LeafRecord));
  }
  ssd::ManifestHeader h{};
  h.magic = ssd::kManifestMagic;
  h.version = ssd::kFormatVersion;
  h.table_count = static_cast<uint32_t>(m.tables.size());
  h.generation = m.generation;
  h.meta_bytes = m.meta.size();
  h.body_bytes = body.size();
  std::string out;
  out.reserve(sizeof(h) + body.size() + 8);
  Append(&out, h);
  out += body;
  Append(&out, XXH3_64bits(out.data(), out.size()));
  return out;
}

Result<Manifest> DecodeManifest(const std::string& bytes, const std::string& path) {
  Reader in(bytes, path);
  ssd::ManifestHeader h;
  STRATA_RETURN_IF_ERROR(in.Get(&h, "header"));
  if (h.magic != ssd::kManifestMagic) return Status::Corruption(path + " offset 0: bad magic");
  if (h.version != ssd::kFormatVersion) {
    return Status::Corruption(path + " offset 8: format version " + std::to_string(h.version) +
                              " unsupported (this build reads " +
                              std::to_string(ssd::kFormatVersion) + ")");
  }
  if (h.body_bytes != bytes.size() - sizeof(h) - 8 || bytes.size() < sizeof(h) + 8) {
    return Status::Corruption(path + " offset 32: body length does not match the file size");
  }
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  if (XXH3_64bits(bytes.data(), bytes.size() - 8) != stored) {
    return Status::Corruption(path + " offset " + std::to_string(bytes.size() - 8) +
                              ": manifest checksum mismatch");
  }
  Manifest m;
  m.generation = h.generation;
  if (h.meta_bytes > kCheckpointMetaBytesMax || h.meta_bytes > h.body_bytes) {
    return in.Fail("meta length " + std::to_string(h.meta_bytes) + " exceeds the body");
  }
  m.meta.resize(h.meta_bytes);
  STRATA_RETURN_IF_ERROR(in.GetBytes(m.meta.data(), m.meta.size(), "meta"));
  if (h.table_count > kTablesMax) return in.Fail("too many tables");
  for (uint32_t i = 0; i < h.table_count; ++i) {
    ssd::TableRecord r;
    STRATA_RETURN_IF_ERROR(in.Get(&r, "table record"));
    if (r.name_bytes > kTableNameBytesMax || r.row_bytes == 0 || r.row_bytes > kRowBytesMax ||
        r.page_bytes != ssd::PageBytes(r.row_bytes) || r.leaf_count == 0 ||
        r.leaf_count > kPagesPerFileMax) {
      return in.Fail("bad table record");
    }
    ManifestTable t;
    t.spec.id = r.table_id;
    t.spec.row_bytes = r.row_bytes;
    t.spec.name.resize(r.name_bytes);
    STRATA_RETURN_IF_ERROR(in.GetBytes(t.spec.name.data(), r.name_bytes, "table name"));
    t.page_bytes = r.page_bytes;
    t.file_number = r.file_number;
    t.row_count = r.row_count;
    if (r.leaf_count * sizeof(ssd::LeafRecord) > bytes.size()) return in.Fail("leaf count");
    t.leaves.resize(r.leaf_count);
    STRATA_RETURN_IF_ERROR(
        in.GetBytes(t.leaves.data(), r.leaf_count * sizeof(ssd::LeafRecord), "leaves"));
    if (t.leaves[0].low_mixed != 0) return in.Fail("first leaf does not start at 0");
    for (size_t l = 1; l < t.leaves.size(); ++l) {
      if (t.leaves[l].low_mixed <= t.leaves[l - 1].low_mixed) return in.Fail("leaves unsorted");
    }
    m.tables.push_back(std::move(t));
  }
  if (in.pos() != bytes.size() - 8) return in.Fail("trailing bytes");
  return m;
}

Status WriteManifest(io::Env* env, const std::string& dir, const Manifest& manifest,
                     uint64_t* bytes_written) {
  const std::string bytes = EncodeManifest(manifest);
  const std::string tmp = dir + "/" + ssd::kManifestTmpName;
  {
    io::FileOptions options;
    options.create = true;
    options.truncate = true;
    STRATA_ASSIGN_OR_RETURN(auto file, env->OpenFile(tmp, options));
    STRATA_RETURN_IF_ERROR(file->Write(0, bytes.data(), bytes.size()));
    STRATA_RETURN_IF_ERROR(file->Sync());
  }
  STRATA_RETURN_IF_ERROR(env->RenameFile(tmp, dir + "/" + ssd::kManifestName));
  STRATA_RETURN_IF_ERROR(env->SyncDir(dir));
  *bytes_written = bytes.size();
  return Status::Ok();
}

Result<std::optional<Manifest>> ReadManifest(io::Env* env, const std::string& dir) {
  const std::string path = dir + "/" + ssd::kManifestName;
  if (!env->FileExists(path)) return std::optional<Manifest>();
  io::FileOptions options;
  options.read_only = true;
  STRATA_ASSIGN_OR_RETURN(auto file, env->OpenFile(path, options));
  STRATA_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  if (size > kManifestBytesMax) return Status::Corruption(path + ": larger than kManifestBytesMax");
  std::string bytes(size, '\0');
  size_t got = 0;
  STRATA_RETURN_IF_ERROR(file->Read(0, size, bytes.data(), &got));
  if (got != size)
    return Status::Corruption(path + " offset " + std::to_string(got) + ": short read");
  STRATA_ASSIGN_OR_RETURN(Manifest m, DecodeManifest(bytes, path));
  return std::optional<Manifest>(std::move(m));
}

}  // namespace strata::storage
