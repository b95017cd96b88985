// A training pipeline's use of the installed package, through the public
// headers only: open a Store, pull, push, checkpoint, close, reopen and read
// the pushed rows back; then write a trace and read it back. Prints
// "strata-consumer-ok" when every check held; otherwise names the failed
// check and exits 1.
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "strata/options.h"
#include "strata/status.h"
#include "strata/store.h"
#include "strata/trace.h"
#include "strata/version.h"

namespace {

int Fail(const char* what, const strata::Status& s = strata::Status::Ok()) {
  std::fprintf(stderr, "consumer: %s failed: %s\n", what, s.ToString().c_str());
  return 1;
}

std::vector<strata::TableOptions> Tables() {
  strata::TableOptions t;
  t.name = "ads";
  t.dim = 8;
  t.optimizer.kind = strata::Optimizer::kSgd;
  t.optimizer.learning_rate = 0.5f;
  return {t};
}

strata::StoreOptions Options(const std::string& dir) {
  strata::StoreOptions o;
  o.dir = dir;
  o.use_gpu = false;  // the host runner: the test runs on machines without a GPU
  o.device_rows_max = 64;
  o.dram_rows_max = 128;
  return o;
}

int RunStore(const std::string& dir) {
  const std::vector<strata::Key> keys = {7, 11, 1000003};
  const uint32_t dim = Tables()[0].dim;
  std::vector<float> before(keys.size() * dim), after(keys.size() * dim);
  std::vector<float> grads(keys.size() * dim, 1.0f);
  {
    auto store = strata::Store::Open(Options(dir), Tables());
    if (!store.ok()) return Fail("Store::Open (new)", store.status());
    auto w = (*store)->RegisterWorker();
    if (!w.ok()) return Fail("RegisterWorker", w.status());
    auto t = (*store)->FindTable("ads");
    if (!t.ok()) return Fail("FindTable", t.status());
    if (auto s = (*store)->Pull(*w, *t, keys, before.data()); !s.ok()) return Fail("Pull", s);
    if (auto s = (*store)->Push(*w, *t, keys, grads.data()); !s.ok()) return Fail("Push", s);
    if (auto s = (*store)->Pull(*w, *t, keys, after.data()); !s.ok()) return Fail("Pull", s);
    for (size_t i = 0; i < after.size(); ++i) {
      // SGD with learning rate 0.5 and gradient 1: each float drops by 0.5.
      if (std::fabs(after[i] - (before[i] - 0.5f)) > 1e-6f) return Fail("SGD step");
    }
    if (auto s = (*store)->Checkpoint(); !s.ok()) return Fail("Checkpoint", s);
    if (auto s = (*store)->Close(); !s.ok()) return Fail("Close", s);
  }
  auto store = strata::Store::Open(Options(dir), Tables());
  if (!store.ok()) return Fail("Store::Open (reopen)", store.status());
  auto w = (*store)->RegisterWorker();
  if (!w.ok()) return Fail("RegisterWorker (reopen)", w.status());
  std::vector<float> reread(keys.size() * dim);
  if (auto s = (*store)->Pull(*w, 0, keys, reread.data()); !s.ok()) return Fail("Pull (reopen)", s);
  if (reread != after) return Fail("rows after reopen equal the checkpointed rows");
  if (auto s = (*store)->Close(); !s.ok()) return Fail("Close (reopen)", s);
  return 0;
}

int RunTrace(const std::string& path) {
  strata::trace::TraceHeader header;
  header.tables = {{"ads", 1 << 20}};
  auto writer = strata::trace::TraceWriter::Create(path, header);
  if (!writer.ok()) return Fail("TraceWriter::Create", writer.status());
  strata::trace::TraceBatch batch;
  batch.clock = 3;
  batch.tables = {{0, {5, 9, 5}}};
  if (auto s = (*writer)->Append(batch); !s.ok()) return Fail("TraceWriter::Append", s);
  if (auto s = (*writer)->Finish(); !s.ok()) return Fail("TraceWriter::Finish", s);

  auto reader = strata::trace::TraceReader::Open(path);
  if (!reader.ok()) return Fail("TraceReader::Open", reader.status());
  strata::trace::TraceBatch read;
  auto more = (*reader)->Next(&read);
  if (!more.ok() || !*more) return Fail("TraceReader::Next", more.status());
  if (read.clock != 3 || read.tables.size() != 1 || read.tables[0].keys != batch.tables[0].keys) {
    return Fail("trace batch read back equals the batch written");
  }
  more = (*reader)->Next(&read);
  if (!more.ok() || *more) return Fail("trace ends after one batch", more.status());
  return 0;
}

}  // namespace

int main() {
  char dir_template[] = "/tmp/strata-consumer-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return Fail("mkdtemp");
  const std::filesystem::path dir = dir_template;
  int rc = RunStore((dir / "store").string());
  if (rc == 0) rc = RunTrace((dir / "ads.trace").string());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (rc != 0) return rc;
  std::printf("strata-consumer-ok %s gpus=%d\n", strata::Version(), strata::VisibleGpuCount());
  return 0;
}
