// One line of a CSV file split into its fields: the rule both readers of CSV
// follow, `strata trace import --format csv` (trace/importers.cc) and `strata
// train --format csv` (examples/train/dataset.cc), so a file means the same
// to both.
//
// Fields are separated by `separator`. A field that opens with a double
// quote is quoted: it may hold the separator, "" inside it is one quote, and
// it ends at the next lone quote. A quote anywhere else is an ordinary
// character. A record is one line: a quoted field still open at the end of
// the line is an error (no quoted line breaks).
//
// Thread safety: a function.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"

namespace strata::trace {

// Splits `line` (without its line break) into `fields`, reusing their
// storage; InvalidArgument when a quoted field is not closed on the line.
// REQUIRES: separator != '"'.
[[nodiscard]] Status SplitCsvLine(std::string_view line, char separator,
                                  std::vector<std::string>* fields);

}  // namespace strata::trace
