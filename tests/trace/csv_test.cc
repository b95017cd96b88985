// strata-test-labels: unit
// strata-test-timeout: 60
#include "trace/csv.h"

#include <gtest/gtest.h>

namespace strata::trace {
namespace {

std::vector<std::string> Split(std::string_view line, char separator = ',') {
  std::vector<std::string> fields = {"stale", "storage", "reused"};
  const Status s = SplitCsvLine(line, separator, &fields);
  EXPECT_TRUE(s.ok()) << line << ": " << s.ToString();
  return fields;
}

using Fields = std::vector<std::string>;

TEST(SplitCsvLineTest, PlainQuotedAndEmptyFields) {
  EXPECT_EQ(Split(""), Fields{""});
  EXPECT_EQ(Split("a,b,,c,"), (Fields{"a", "b", "", "c", ""}));
  EXPECT_EQ(Split("a;b,c", ';'), (Fields{"a", "b,c"}));
  EXPECT_EQ(Split("\"a,b\",c"), (Fields{"a,b", "c"}));
  EXPECT_EQ(Split("\"say \"\"hi\"\"\",\"\""), (Fields{"say \"hi\"", ""}));
  // A quote inside an unquoted field is a character.
  EXPECT_EQ(Split("5\"2,x\"y"), (Fields{"5\"2", "x\"y"}));
}

TEST(SplitCsvLineTest, AQuotedFieldOpenAtTheEndOfTheLineIsAnError) {
  std::vector<std::string> fields;
  for (std::string_view line : {"\"a", "x,\"a,b", "x,\"a\"\"", "\""}) {
    const Status s = SplitCsvLine(line, ',', &fields);
    EXPECT_TRUE(s.IsInvalidArgument()) << line;
    EXPECT_NE(s.message().find("unterminated quoted field"), std::string::npos) << s.ToString();
  }
  EXPECT_NE(SplitCsvLine("x,\"a", ',', &fields).message().find("field 2"), std::string::npos);
}

}  // namespace
}  // namespace strata::trace
