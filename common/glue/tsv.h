// GLUE's TSV files as the reference reads them (Python's csv module, delimiter '\t', no quote
// character): fields are the raw text between tabs, quotes are ordinary characters.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace distlm::glue {

struct TsvRow {
  int line = 0;                     // 1-based line number in the file, for messages
  std::vector<std::string> fields;  // at least one (an empty line is an error)
};

struct TsvTable {
  std::string name;  // the file's path, for messages
  TsvRow header;     // the first line
  std::vector<TsvRow> rows;  // the lines after it
};

// Splits TSV text. Lines end in "\n", "\r\n" or "\r" (Python's universal newlines); a UTF-8
// byte-order mark at the start is skipped. Throws UserError "<name>:<line>: ..." for invalid
// UTF-8 (with the column) and for an empty line, and "<name>: ..." for text without a header.
TsvTable ParseTsv(std::string_view text, const std::string& name);

// ParseTsv on a file's contents; UserError naming the path when it cannot be read.
TsvTable ReadTsv(const std::string& path);

}  // namespace distlm::glue
