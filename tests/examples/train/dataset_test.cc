#include "examples/train/dataset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "tests/util/source_files.h"

namespace strata::train {
namespace {

std::string CriteoLine(const std::string& label, const std::string& i1, const std::string& c1) {
  std::string line = label + "\t" + i1;
  for (int i = 2; i <= 13; ++i) line += "\t" + std::to_string(i);
  line += "\t" + c1;
  for (int i = 2; i <= 26; ++i) line += "\tv" + std::to_string(i);
  return line + "\n";
}

TEST(DatasetTest, CriteoRowsFieldsAndMissingValues) {
  std::string text = CriteoLine("1", "5", "68fd1e64") + CriteoLine("0", "", "") +
                     CriteoLine("0", "-3", "68fd1e64");
  auto d = ParseCriteoTsv(text, "t.tsv", 0);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->rows(), 3u);
  EXPECT_EQ(d->categorical_columns(), 26u);
  EXPECT_EQ(d->dense_columns(), 13u);
  EXPECT_EQ(d->labels, (std::vector<float>{1, 0, 0}));
  EXPECT_FLOAT_EQ(d->DenseRow(0)[0], std::log1p(5.0f));
  EXPECT_FLOAT_EQ(d->DenseRow(1)[0], 0.0f);  // missing
  EXPECT_FLOAT_EQ(d->DenseRow(2)[0], -std::log1p(3.0f));
  EXPECT_FLOAT_EQ(d->DenseRow(0)[12], std::log1p(13.0f));
  EXPECT_TRUE(d->Present(0, 0));
  EXPECT_FALSE(d->Present(1, 0));  // missing: no key
  EXPECT_TRUE(d->Present(1, 1));
  EXPECT_EQ(d->KeyAt(0, 0), d->KeyAt(2, 0));
  EXPECT_EQ(d->KeyAt(0, 0), HashFeature(0, "68fd1e64"));
  EXPECT_EQ(d->KeyAt(0, 25), HashFeature(25, "v26"));
}

TEST(DatasetTest, RowsMaxStopsEarly) {
  std::string text = CriteoLine("1", "5", "a") + CriteoLine("0", "1", "b");
  auto d = ParseCriteoTsv(text, "t.tsv", 1);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->rows(), 1u);
}

TEST(DatasetTest, CriteoErrorsNameLineAndProblem) {
  auto short_row = ParseCriteoTsv(CriteoLine("1", "5", "a") + "1\t2\t3\n", "t.tsv", 0);
  ASSERT_FALSE(short_row.ok());
  EXPECT_NE(short_row.status().message().find("t.tsv:2"), std::string::npos);
  EXPECT_NE(short_row.status().message().find("3 tab-separated fields"), std::string::npos);

  auto bad_label = ParseCriteoTsv(CriteoLine("2", "5", "a"), "t.tsv", 0);
  ASSERT_FALSE(bad_label.ok());
  EXPECT_NE(bad_label.status().message().find("label '2'"), std::string::npos);

  auto bad_int = ParseCriteoTsv(CriteoLine("1", "x5", "a"), "t.tsv", 0);
  ASSERT_FALSE(bad_int.ok());
  EXPECT_NE(bad_int.status().message().find("column I1"), std::string::npos);

  EXPECT_TRUE(ParseCriteoTsv("", "t.tsv", 0).status().IsInvalidArgument());
  EXPECT_TRUE(ReadCriteoTsv("/nonexistent/criteo.tsv").status().IsIOError());
}

TEST(DatasetTest, HashSeparatesColumnsAndValues) {
  EXPECT_EQ(HashFeature(3, "abc"), HashFeature(3, "abc"));
  EXPECT_NE(HashFeature(3, "abc"), HashFeature(4, "abc"));
  EXPECT_NE(HashFeature(3, "abc"), HashFeature(3, "abd"));
  EXPECT_NE(HashFeature(0, ""), HashFeature(1, ""));
}

TEST(DatasetTest, CsvNamedColumnsQuotesAndErrors) {
  CsvSpec spec;
  spec.label_column = "click";
  spec.categorical_columns = {"site", "ad"};
  spec.dense_columns = {"price"};
  std::string text =
      "ad,price,click,ignored,site\n"
      "a1,2.5,1,x,\"s,1\"\n"
      "a2,,0,y,\n";
  auto d = ParseCsv(text, "t.csv", spec, 0);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->rows(), 2u);
  EXPECT_EQ(d->categorical_names, (std::vector<std::string>{"site", "ad"}));
  EXPECT_EQ(d->KeyAt(0, 0), HashFeature(0, "s,1"));
  EXPECT_EQ(d->KeyAt(0, 1), HashFeature(1, "a1"));
  EXPECT_FALSE(d->Present(1, 0));
  EXPECT_FLOAT_EQ(d->DenseRow(0)[0], std::log1p(2.5f));
  EXPECT_FLOAT_EQ(d->DenseRow(1)[0], 0.0f);

  spec.categorical_columns = {"nope"};
  auto missing_column = ParseCsv(text, "t.csv", spec, 0);
  ASSERT_FALSE(missing_column.ok());
  EXPECT_NE(missing_column.status().message().find("'nope'"), std::string::npos);

  spec.categorical_columns = {"site"};
  spec.dense_columns.clear();
  auto ragged = ParseCsv("site,click\na\n", "t.csv", spec, 0);
  ASSERT_FALSE(ragged.ok());
  EXPECT_NE(ragged.status().message().find("t.csv:2"), std::string::npos);
}

TEST(DatasetTest, ReadsTheShippedCriteoSample) {
  auto d = ReadCriteoTsv(strata::testing::CriteoSamplePath());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->rows(), 10000u);
  std::set<std::pair<size_t, Key>> unique;
  double clicks = 0;
  for (size_t r = 0; r < d->rows(); ++r) {
    clicks += d->labels[r];
    for (size_t c = 0; c < d->categorical_columns(); ++c) {
      if (d->Present(r, c)) unique.insert({c, d->KeyAt(r, c)});
    }
  }
  EXPECT_EQ(unique.size(), 43579u);  // distinct (column, value) pairs, counted with awk
  EXPECT_EQ(clicks, 2182.0);
}

}  // namespace
}  // namespace strata::train
