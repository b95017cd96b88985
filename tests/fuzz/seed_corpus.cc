// Writes the seed inputs of the fuzz targets with the project's own writers:
// `fuzz_seed_corpus tests/fuzz/corpus` (re)writes the files named seed-* and
// edge-* under <dir>/<target>/ and nothing else, so regression inputs saved
// there (crash-*) stay. Seeds are valid inputs; edge-* are small damaged or
// degenerate ones. Input layouts are described in each <target>_fuzz.cc.
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "storage/ssd/manifest.h"
#include "storage/ssd/page_file.h"
#include "storage/ssd/row_store_factory.h"
#include "strata/trace.h"
#include "tests/fuzz/fuzz_util.h"

namespace strata::fuzz {
namespace {

std::string out_dir;

void Put(const std::string& target, const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(out_dir + "/" + target);
  WriteFile(out_dir + "/" + target + "/" + name, bytes.data(), bytes.size());
}

void Check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "fuzz_seed_corpus: %s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

std::string WriteTrace(const trace::TraceHeader& header,
                       const std::vector<trace::TraceBatch>& batches) {
  const std::string path = ScratchPath("seed.trace");
  auto writer = trace::TraceWriter::Create(path, header);
  Check(writer.status(), "trace create");
  for (const auto& b : batches) Check((*writer)->Append(b), "trace append");
  Check((*writer)->Finish(), "trace finish");
  return ReadFile(path);
}

void TraceSeeds() {
  trace::TraceHeader two;
  two.worker_count = 2;
  two.tables = {{"t0", 1000}, {"user_id", 0}};
  std::vector<trace::TraceBatch> batches(3);
  batches[0] = {0, 0, {{0, {1, 2, 3, 2}}, {1, {0, ~Key{0}}}}};
  batches[1] = {1, 0, {{1, {42}}}};
  batches[2] = {0, 1, {{0, {}}, {1, {7, 7, 7}}}};
  const std::string small = WriteTrace(two, batches);
  Put("trace_reader", "seed-two-tables.trace", small);
  trace::TraceHeader one;
  one.tables = {{"keys", 0}};
  Put("trace_reader", "seed-no-batches.trace", WriteTrace(one, {}));
  Put("trace_reader", "seed-one-batch.trace", WriteTrace(one, {{0, -5, {{0, {9, 8, 7, 6}}}}}));
  Put("trace_reader", "edge-empty", "");
  Put("trace_reader", "edge-header-cut", small.substr(0, 40));
  Put("trace_reader", "edge-end-record-cut", small.substr(0, small.size() - 9));
}

// An input of the importers target: the control byte, then the text.
std::string Importer(char control, const std::string& text) {
  std::string input(1, control);
  input += text;
  return input;
}

void ImporterSeeds() {
  // Control byte: bits 0-1 importer (0 lines, 1 csv, 2 criteo), 2-3 batch
  // size (1, 2, 3, 4096), bit 4 tab delimiter, bit 5 label column "label".
  Put("importers", "seed-lines", Importer('\x00', "1 2 3\n18446744073709551615\t0\n\n7"));
  Put("importers", "seed-lines-crlf", Importer('\x0c', "10 20\r\n30\r\n"));
  Put("importers", "seed-csv-label", Importer('\x25', "label,a,b\n1,x,y\n0,,z\n\n1,x,\n"));
  Put("importers", "seed-csv-tab", Importer('\x11', "a\tb\tc\nx\ty\tz\n1\t2\t3\n"));
  std::string criteo(1, '\x06');
  for (int row = 0; row < 3; ++row) {
    criteo += std::to_string(row % 2);
    for (int i = 1; i <= 13; ++i) {
      criteo += '\t';
      if (i % 4 != row) criteo += std::to_string(i * row);
    }
    for (int c = 1; c <= 26; ++c) {
      char hex[16];
      std::snprintf(hex, sizeof(hex), "%08x", unsigned(c * 2654435761u + row));
      criteo += '\t';
      if (c % 5 != row) criteo += hex;
    }
    criteo += "\n";
  }
  Put("importers", "seed-criteo", criteo);
  Put("importers", "edge-lines-bad-token", Importer('\x00', "1 2\n3 x4\n"));
  Put("importers", "edge-csv-short-row", Importer('\x01', "a,b\n1\n"));
  Put("importers", "edge-criteo-short-row", Importer('\x02', "1\t2\t3\n"));
}

// A native store with two tables, rows written and checkpointed: its MANIFEST
// and one page of each data file, as the store wrote them.
void StoreSeeds() {
  const std::string dir = ScratchPath("store");
  storage::RowStoreOptions options;
  options.dir = dir;
  const std::vector<storage::TableSpec> specs = {{3, "small", 16}, {9, "wide", 500}};
  {
    auto store = storage::OpenRowStore(options, specs);
    Check(store.status(), "open store");
    for (const auto& spec : specs) {
      std::vector<Key> keys;
      for (Key k = 0; k < 40; ++k) keys.push_back(k * 7919);
      std::vector<std::byte> rows(keys.size() * spec.row_bytes);
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = std::byte(i * 31 + spec.id);
      Check((*store)->MultiPut(spec.id, keys, rows), "put");
    }
    const std::vector<std::byte> meta = {std::byte{1}, std::byte{2}, std::byte{3}};
    Check((*store)->Checkpoint(meta), "checkpoint");
  }
  auto manifest = storage::ReadManifest(io::Env::Default(), dir);
  Check(manifest.status(), "read manifest");
  Put("manifest", "seed-store.manifest", storage::EncodeManifest(**manifest));
  for (const storage::ManifestTable& t : (*manifest)->tables) {
    // Prefix of the leaf page target: row_bytes, table id, low_mixed.
    const storage::ssd::LeafRecord& leaf = t.leaves.back();
    const std::string data =
        ReadFile(dir + "/" + storage::ssd::DataFileName(t.spec.id, t.file_number));
    std::string input(16, '\0');
    const uint32_t row_bytes = t.spec.row_bytes - 1;  // the target adds 1
    std::memcpy(input.data(), &row_bytes, 4);
    std::memcpy(input.data() + 4, &t.spec.id, 4);
    std::memcpy(input.data() + 8, &leaf.low_mixed, 8);
    input += data.substr(uint64_t{leaf.page} * t.page_bytes, t.page_bytes);
    Put("leaf_page", "seed-store-" + t.spec.name + ".page", input);
  }
  std::filesystem::remove_all(dir);
}

void ManifestSeeds() {
  storage::Manifest m;
  m.generation = 7;
  storage::ManifestTable t;
  t.spec = {1, "emb", 64};
  t.page_bytes = storage::ssd::PageBytes(64);
  t.file_number = 2;
  t.row_count = 5;
  t.leaves = {{0, 4, 2}, {1000, storage::ssd::kNoPage, 0}, {5000, 0, 3}};
  m.tables.push_back(t);
  const std::string one = storage::EncodeManifest(m);
  Put("manifest", "seed-one-table.manifest", one);
  Put("manifest", "seed-empty-store.manifest",
      storage::EncodeManifest(storage::Manifest{1, {}, {}}));
  Put("manifest", "edge-empty", "");
  Put("manifest", "edge-header-only", one.substr(0, 40));
  std::string bad_magic = one;
  bad_magic[0] ^= 1;
  Put("manifest", "edge-bad-magic", bad_magic);
}

void LeafPageSeeds() {
  // A page of 3 rows of 16 bytes, sealed by the store's SealPage.
  const uint32_t row_bytes = 16;
  const uint32_t page_bytes = storage::ssd::PageBytes(row_bytes);
  const uint32_t capacity = storage::ssd::PageCapacity(row_bytes);
  std::string page(page_bytes, '\0');
  const Key keys[3] = {5, 17, 99};
  for (uint32_t s = 0; s < 3; ++s) {
    std::memcpy(page.data() + 32 + s * 8, &keys[s], 8);
    std::memset(page.data() + 32 + capacity * 8 + s * row_bytes, 'a' + s, row_bytes);
  }
  const uint64_t low = 0;
  storage::SealPage(reinterpret_cast<std::byte*>(page.data()), page_bytes, 4, 3, low);
  std::string prefix(16, '\0');
  const uint32_t row_field = row_bytes - 1, table = 4;
  std::memcpy(prefix.data(), &row_field, 4);
  std::memcpy(prefix.data() + 4, &table, 4);
  Put("leaf_page", "seed-three-rows.page", prefix + page);
  Put("leaf_page", "edge-prefix-only", prefix);
  std::string over = page;
  const uint16_t too_many = uint16_t(capacity + 1);
  std::memcpy(over.data() + 14, &too_many, 2);
  Put("leaf_page", "edge-row-count-over-capacity.page", prefix + over);
}

}  // namespace
}  // namespace strata::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seed_corpus <corpus dir>\n");
    return 2;
  }
  strata::fuzz::out_dir = argv[1];
  strata::fuzz::TraceSeeds();
  strata::fuzz::ImporterSeeds();
  strata::fuzz::StoreSeeds();
  strata::fuzz::ManifestSeeds();
  strata::fuzz::LeafPageSeeds();
  return 0;
}
