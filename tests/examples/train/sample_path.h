// Where the tests of the training example find the shipped Criteo sample:
// $STRATA_SOURCE_DIR (set by CTest) or, when a binary runs by hand, the
// source tree this file sits in. Test code only.
#pragma once

#include <cstdlib>
#include <string>

namespace strata::train::testing {

inline std::string SourceDir() {
  if (const char* dir = std::getenv("STRATA_SOURCE_DIR")) return dir;
  std::string here = __FILE__;  // <src>/tests/examples/train/sample_path.h
  for (int i = 0; i < 4; ++i) here = here.substr(0, here.find_last_of('/'));
  return here;
}

inline std::string CriteoSamplePath() {
  return SourceDir() + "/examples/train/data/criteo_kaggle_train_head10k.txt";
}

}  // namespace strata::train::testing
