#include "common/runtime/errors.h"

#include <cstdio>

namespace distlm {

void StudentTodo(const std::string& what, const std::string& handout_section) {
  throw UserError("TODO(student): " + what + " is not implemented yet; see " + handout_section);
}

std::string OneLine(const std::exception& e) {
  // LibTorch's c10::Error puts its message first and the backtrace after a newline (1.13 and
  // 2.x alike), so the first line of what() is the message for every exception. No LibTorch
  // header here: this library (common/runtime:base) is shared with programs that do not load
  // LibTorch, and a header of another LibTorch than the one linked would not match its objects.
  std::string msg = e.what();
  auto nl = msg.find('\n');
  if (nl != std::string::npos) msg = msg.substr(0, nl);
  return msg;
}

int RunMain(const std::function<int()>& body) {
  try {
    return body();
  } catch (const UserError& e) {
    std::fprintf(stderr, "error: %s\n", OneLine(e).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", OneLine(e).c_str());
    return 1;
  }
}

}  // namespace distlm
