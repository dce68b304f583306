// User-facing errors: one line naming the file, line, tensor or flag, and a non-zero exit.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

namespace distlm {

// Thrown for anything the user can fix (bad flag, bad file, unreachable master). The message
// is the whole story on one line; main() prints it as "error: <message>" and exits with 2.
class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// What a student's unfinished stub throws: "TODO(student): <what> is not implemented yet; see
// <handout_section>". A UserError, so the binary exits 2 with that one line.
[[noreturn]] void StudentTodo(const std::string& what, const std::string& handout_section);

// First line of an exception's message, without LibTorch's backtrace.
std::string OneLine(const std::exception& e);

// Runs body and turns every exception into "error: ..." on stderr: exit 2 for UserError, 1 for
// anything else. Returns body's result otherwise.
int RunMain(const std::function<int()>& body);

}  // namespace distlm
