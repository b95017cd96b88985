#include "tests/util/scratch_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace strata::testing {
namespace {

constexpr char kKeepEnv[] = "STRATA_KEEP_TEST_DIRS";
constexpr size_t kNameCharsMax = 64;  // of the test's name in the directory's name

// "strata_<Suite>.<Test>_" with every character outside [A-Za-z0-9_.]
// (the '/' of typed and parameterised tests) replaced by '_'.
std::string Prefix() {
  std::string name = "test";
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    name = std::string(info->test_suite_name()) + "." + info->name();
  }
  if (name.size() > kNameCharsMax) name.resize(kNameCharsMax);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') c = '_';
  }
  return "strata_" + name + "_";
}

bool KeepFailedDirs() {
  const char* keep = std::getenv(kKeepEnv);
  return keep != nullptr && *keep != '\0' && std::strcmp(keep, "0") != 0;
}

}  // namespace

ScratchDir::ScratchDir() {
  std::string tmpl = ::testing::TempDir() + Prefix() + "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "ScratchDir: mkdtemp %s: %s\n", tmpl.c_str(), std::strerror(errno));
    std::abort();
  }
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  if (::testing::Test::HasFailure() && KeepFailedDirs()) {
    std::fprintf(stderr, "ScratchDir: kept %s (%s is set)\n", path_.c_str(), kKeepEnv);
    return;
  }
  std::error_code error;
  std::filesystem::remove_all(path_, error);
  if (error) ADD_FAILURE() << "ScratchDir: cannot remove " << path_ << ": " << error.message();
}

}  // namespace strata::testing
