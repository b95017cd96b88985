// SplitCsvLine (csv.h).
#include "trace/csv.h"

#include "base/assert.h"

namespace strata::trace {

Status SplitCsvLine(std::string_view line, char separator, std::vector<std::string>* fields) {
  STRATA_ASSERT(separator != '"', "a quote cannot separate CSV fields");
  size_t count = 0;
  auto next = [&]() -> std::string* {
    if (count == fields->size()) fields->emplace_back();
    std::string* field = &(*fields)[count++];
    field->clear();
    return field;
  };
  std::string* field = next();
  bool in_quotes = false;
  bool opened = false;  // the field has content (a quote then opens nothing)
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        *field += '"';
        ++i;
      } else if (c == '"') {
        in_quotes = false;
      } else {
        *field += c;
      }
    } else if (c == '"' && !opened) {
      in_quotes = true;
      opened = true;
    } else if (c == separator) {
      field = next();
      opened = false;
    } else {
      *field += c;
      opened = true;
    }
  }
  fields->resize(count);
  if (in_quotes) {
    return Status::InvalidArgument("field " + std::to_string(count) +
                                   ": unterminated quoted field (a field that opens with '\"' "
                                   "must close on its line)");
  }
  return Status::Ok();
}

}  // namespace strata::trace
