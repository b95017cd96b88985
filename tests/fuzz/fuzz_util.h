// Helpers of the fuzz targets (tests/fuzz/<name>_fuzz.cc).
//
// Each target defines LLVMFuzzerTestOneInput. `make fuzz` links it with
// libFuzzer (clang, -fsanitize=fuzzer,address,undefined); `make test` links
// it with replay_main.cc, which feeds it every file of its checked-in corpus
// (tests/fuzz/corpus/<name>/). A target checks properties of the code under
// test with STRATA_ASSERT: a failed one aborts, which libFuzzer reports as a
// crash and saves the input.
//
// Code that reads files by path (trace reader, importers, MANIFEST) gets the
// input through a file in ScratchDir(): a directory of this process under
// /dev/shm (memory, no disk writes) or $TMPDIR, removed at exit.
//
// Thread safety: none; a fuzz target runs on one thread.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <string_view>

#include "base/assert.h"
#include "strata/status.h"

namespace strata::fuzz {

inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    std::string base = "/dev/shm";
    std::error_code ec;
    if (!std::filesystem::is_directory(base, ec)) {
      const char* tmp = std::getenv("TMPDIR");
      base = tmp != nullptr ? tmp : "/tmp";
    }
    std::string tmpl = base + "/strata_fuzz_XXXXXX";
    STRATA_ASSERT(::mkdtemp(tmpl.data()) != nullptr, "fuzz: mkdtemp failed");
    static std::string made;
    made = tmpl;
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(made, ignored);
    });
    return tmpl;
  }();
  return dir;
}

inline std::string ScratchPath(const std::string& name) { return ScratchDir() + "/" + name; }

inline void WriteFile(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  STRATA_ASSERT(out.good(), "fuzz: cannot write the scratch file");
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Asserts `s` is an error of `code` whose message contains every one of
// `needles` (what the documented error format promises to name).
inline void CheckError(const Status& s, StatusCode code,
                       std::initializer_list<std::string_view> needles) {
  const std::string msg = s.ToString();
  if (s.code() != code) {
    std::fprintf(stderr, "fuzz: unexpected status %s\n", msg.c_str());
    STRATA_ASSERT(s.code() == code, "fuzz: error of an unexpected code");
  }
  for (std::string_view n : needles) {
    if (msg.find(n) == std::string::npos) {
      std::fprintf(stderr, "fuzz: '%s' does not name '%.*s'\n", msg.c_str(), int(n.size()),
                   n.data());
      STRATA_ASSERT(false, "fuzz: error message misses a documented part");
    }
  }
}

}  // namespace strata::fuzz
