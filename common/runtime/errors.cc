#include "common/runtime/errors.h"

#include <cstdio>

#include <c10/util/Exception.h>

namespace distlm {

void StudentTodo(const std::string& what, const std::string& handout_section) {
  throw UserError("TODO(student): " + what + " is not implemented yet; see " + handout_section);
}

std::string OneLine(const std::exception& e) {
  std::string msg;
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    msg = c10_error->what_without_backtrace();
  } else {
    msg = e.what();
  }
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
