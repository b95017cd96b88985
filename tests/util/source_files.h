// Where tests find files that ship in the source tree (the Criteo sample):
// $STRATA_SOURCE_DIR (set by CTest) or, when a binary runs by hand, the source
// tree this file sits in. Test code only.
#pragma once

#include <cstdlib>
#include <string>

namespace strata::testing {

inline std::string SourceDir() {
  if (const char* dir = std::getenv("STRATA_SOURCE_DIR")) return dir;
  std::string here = __FILE__;  // <src>/tests/util/source_files.h
  for (int i = 0; i < 3; ++i) here = here.substr(0, here.find_last_of('/'));
  return here;
}

// The first 10,000 rows of the Criteo Kaggle training set (40 tab-separated
// fields: label, 13 dense, 26 categorical).
inline std::string CriteoSamplePath() {
  return SourceDir() + "/examples/train/data/criteo_kaggle_train_head10k.txt";
}

}  // namespace strata::testing
