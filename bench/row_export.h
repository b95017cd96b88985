// RowExport: the rows of a store at the end of a replay as text, to compare
// two runs (`strata replay --export FILE`, and a cluster replay's export,
// which rank 0 merges from every rank's shard).
//
// One line per row, "<table, 8 hex digits> <key, 16 hex digits> <v0> <v1> ...",
// each value printed with 9 significant digits (a float's exact round trip);
// the file's lines are sorted, so by table, then key.
//
// Thread safety: none (one thread builds and writes an export).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "strata/status.h"
#include "strata/types.h"

namespace strata::bench {

class RowExport {
 public:
  void Add(TableId table, Key key, std::span<const float> row);
  // Lines of another export's Text() (a cluster rank's rows).
  void AddText(const std::string& text);
  size_t size() const { return lines_.size(); }
  // Drops the lines after the first n (a retried scan starts over).
  void Truncate(size_t n) { lines_.resize(n); }
  // The lines, sorted, each ending in '\n'.
  std::string Text();
  // Writes Text() to `path` (replaced); IOError naming it.
  [[nodiscard]] Status Write(const std::string& path);

 private:
  std::vector<std::string> lines_;
};

}  // namespace strata::bench
