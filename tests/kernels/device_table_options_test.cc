// strata-test-timeout: 60
// DeviceTable::Create is the one check of a table's row options (dim,
// optimizer hyper-parameters, initializer scale): each bad value is
// InvalidArgument naming the field and its value; good ones are accepted.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "kernels/device_table.h"

namespace strata::kernels {
namespace {

DeviceTableOptions Good(Optimizer kind) {
  DeviceTableOptions o;
  o.capacity_rows = 64;
  o.dim = 4;
  o.optimizer.kind = kind;
  return o;
}

// Create with `o` fails as InvalidArgument whose message names `field`.
void ExpectRejected(const DeviceTableOptions& o, const std::string& field) {
  auto r = DeviceTable::Create(o, Runner::kHost);
  ASSERT_FALSE(r.ok()) << field;
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().ToString();
}

TEST(DeviceTableOptionsTest, EachBadFieldIsNamed) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    Optimizer kind;
    std::string field;
    std::function<void(DeviceTableOptions*)> spoil;
  };
  const Case cases[] = {
      {Optimizer::kSgd, "capacity_rows", [](auto* o) { o->capacity_rows = 0; }},
      {Optimizer::kSgd, "dim 0", [](auto* o) { o->dim = 0; }},
      {Optimizer::kSgd, "dim 4097", [](auto* o) { o->dim = kTableDimMax + 1; }},
      {Optimizer::kSgd, "batch_keys_max", [](auto* o) { o->batch_keys_max = 0; }},
      {Optimizer::kSgd, "learning_rate", [&](auto* o) { o->optimizer.learning_rate = inf; }},
      {Optimizer::kAdagrad, "epsilon", [](auto* o) { o->optimizer.epsilon = -1; }},
      {Optimizer::kAdagrad, "initial_accumulator",
       [&](auto* o) { o->optimizer.initial_accumulator = nan; }},
      {Optimizer::kAdam, "beta1", [](auto* o) { o->optimizer.beta1 = 1.0f; }},
      {Optimizer::kAdam, "beta2", [](auto* o) { o->optimizer.beta2 = -0.5f; }},
      {Optimizer::kFtrl, "ftrl_alpha", [](auto* o) { o->optimizer.ftrl_alpha = 0; }},
      {Optimizer::kFtrl, "ftrl_l1", [](auto* o) { o->optimizer.ftrl_l1 = -1; }},
      {Optimizer::kSgd, "init_scale", [](auto* o) { o->initializer.scale = -0.1f; }},
  };
  for (const Case& c : cases) {
    DeviceTableOptions o = Good(c.kind);
    c.spoil(&o);
    ExpectRejected(o, c.field);
  }
}

TEST(DeviceTableOptionsTest, ParametersOfOtherOptimizersAreNotChecked) {
  DeviceTableOptions o = Good(Optimizer::kSgd);
  o.optimizer.beta1 = 2.0f;           // Adam only
  o.optimizer.ftrl_alpha = 0.0f;      // FTRL only
  o.optimizer.learning_rate = -1.0f;  // accumulation, used by tests to count pushes
  o.dim = kTableDimMax;
  auto r = DeviceTable::Create(o, Runner::kHost);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

}  // namespace
}  // namespace strata::kernels
