// Replays a fuzz target's corpus without libFuzzer: `<target>_replay DIR|FILE...`
// feeds every file (directories: every regular file in them, sorted by
// name) to LLVMFuzzerTestOneInput once. A broken property aborts the run, so
// under CTest (`make test`) a checked-in input that once crashed a target
// stays fixed. Exits 1 when a directory holds no input at all.
//
// Like `make fuzz` (-malloc_limit_mb), the replay aborts on any single
// allocation by operator new of kAllocationBytesMax or more: inputs are a few
// KiB, so an allocation that large trusts a size read from the input.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
constexpr size_t kAllocationBytesMax = size_t{64} << 20;  // scripts/fuzz.sh FUZZ_MALLOC_MB
}  // namespace

void* operator new(size_t bytes) {
  if (bytes >= kAllocationBytesMax) {
    std::fprintf(stderr, "replay: allocation of %zu bytes (limit %zu)\n", bytes,
                 kAllocationBytesMax);
    std::abort();
  }
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t bytes) { return operator new(bytes); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

int main(int argc, char** argv) {
  size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(argv[i])) {
      for (const auto& entry : std::filesystem::directory_iterator(argv[i])) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      if (files.empty()) {
        std::fprintf(stderr, "replay: %s holds no input\n", argv[i]);
        return 1;
      }
    } else {
      files.push_back(argv[i]);
    }
    for (const auto& file : files) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
        return 1;
      }
      const std::vector<char> bytes(std::istreambuf_iterator<char>(in), {});
      std::fprintf(stderr, "replay: %s (%zu bytes)\n", file.c_str(), bytes.size());
      // A copy of exactly the input's size, so ASan sees a read past its end;
      // never a null pointer, as under libFuzzer.
      std::vector<uint8_t> copy(bytes.begin(), bytes.end());
      static const uint8_t kEmpty = 0;
      LLVMFuzzerTestOneInput(copy.empty() ? &kEmpty : copy.data(), copy.size());
      ++replayed;
    }
  }
  std::fprintf(stderr, "replay: %zu inputs, no failure\n", replayed);
  return 0;
}
