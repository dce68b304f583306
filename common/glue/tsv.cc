#include "common/glue/tsv.h"

#include <sys/stat.h>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/tokenizer/unicode.h"

namespace distlm::glue {
namespace {

std::vector<std::string> SplitTabs(std::string_view line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    size_t tab = line.find('\t', start);
    fields.emplace_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  return fields;
}

}  // namespace

TsvTable ParseTsv(std::string_view text, const std::string& name) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  TsvTable table;
  table.name = name;
  int line_no = 0;
  size_t pos = 0;
  bool have_header = false;
  while (pos < text.size()) {
    ++line_no;
    size_t end = text.find_first_of("\r\n", pos);
    std::string_view line = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    if (end == std::string_view::npos) {
      pos = text.size();
    } else {
      pos = end + 1;
      if (text[end] == '\r' && pos < text.size() && text[pos] == '\n') ++pos;  // "\r\n" is one line end
    }
    const std::string where = name + ":" + std::to_string(line_no);
    size_t bad = tokenizer::FindInvalidUtf8(line);
    if (bad != std::string_view::npos) {
      throw UserError(where + ":" + std::to_string(bad + 1) + ": invalid UTF-8 (the file must be UTF-8 text)");
    }
    if (line.empty()) throw UserError(where + ": empty line (every row needs its tab-separated fields)");
    TsvRow row{line_no, SplitTabs(line)};
    if (!have_header) {
      table.header = std::move(row);
      have_header = true;
    } else {
      table.rows.push_back(std::move(row));
    }
  }
  if (!have_header) throw UserError(name + ": empty file (a GLUE TSV starts with a header row)");
  return table;
}

TsvTable ReadTsv(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) throw UserError(path + ": no such file");
  if (S_ISDIR(st.st_mode)) throw UserError(path + ": is a directory, not a TSV file");
  return ParseTsv(ReadFile(path), path);
}

}  // namespace distlm::glue
