// Replays a fuzz target's corpus without libFuzzer: `<target>_replay DIR|FILE...`
// feeds every file (directories: every regular file in them, sorted by
// name) to LLVMFuzzerTestOneInput once. A broken property aborts the run, so
// under CTest (`make test`) a checked-in input that once crashed a target
// stays fixed. Exits 1 when a directory holds no input at all.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

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
