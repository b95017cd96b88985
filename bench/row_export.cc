// RowExport (row_export.h).
#include "bench/row_export.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>

namespace strata::bench {

void RowExport::Add(TableId table, Key key, std::span<const float> row) {
  char head[32];
  std::snprintf(head, sizeof(head), "%08" PRIx32 " %016" PRIx64, table, key);
  std::string line = head;
  for (float v : row) {
    char value[32];
    std::snprintf(value, sizeof(value), " %.9g", static_cast<double>(v));
    line += value;
  }
  lines_.push_back(std::move(line));
}

void RowExport::AddText(const std::string& text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    if (end > pos) lines_.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
}

std::string RowExport::Text() {
  std::sort(lines_.begin(), lines_.end());
  std::string out;
  for (const std::string& line : lines_) out += line + "\n";
  return out;
}

Status RowExport::Write(const std::string& path) {
  const std::string text = Text();
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return Status::FromErrno(errno, "replay --export: open " + path);
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int saved = errno;
  if (std::fclose(f) != 0 || !written) {
    return Status::FromErrno(written ? errno : saved, "replay --export: write " + path);
  }
  return Status::Ok();
}

}  // namespace strata::bench
