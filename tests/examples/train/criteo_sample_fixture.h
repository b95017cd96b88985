// The fixture of the training example's tests that train on the shipped
// Criteo sample (tests/util/source_files.h): read once per test suite, shared
// read-only by its tests as *data_.
#pragma once

#include <gtest/gtest.h>

#include "examples/train/dataset.h"
#include "tests/util/source_files.h"

namespace strata::train::testing {

class CriteoSampleFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto d = ReadCriteoTsv(strata::testing::CriteoSamplePath());
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    data_ = new Dataset(std::move(*d));
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(data_, nullptr) << "cannot read " << strata::testing::CriteoSamplePath();
  }

  inline static Dataset* data_ = nullptr;
};

}  // namespace strata::train::testing
