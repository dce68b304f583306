// The launcher's checks before anything starts: the options, the executable, the port. Each
// failure is a one-line UserError naming the flag or path, so a typo never starts a rank.
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "common/runtime/errors.h"
#include "tools/launcher.h"
#include "tools/launcher_util.h"

namespace distlm::tools {
namespace {

using launch_internal::Errno;
using launch_internal::FormatSeconds;
using launch_internal::JoinPath;

// More ranks than this on one host is a typo, and would run out of file descriptors (three
// per rank) under the usual limit of 1024.
constexpr int kMaxRanks = 256;

}  // namespace

void ValidateOptions(const LaunchOptions& o) {
  if (o.nproc_per_node < 1 || o.nproc_per_node > kMaxRanks) {
    throw UserError("--nproc_per_node=" + std::to_string(o.nproc_per_node) + " must be between 1 and " +
                    std::to_string(kMaxRanks));
  }
  if (o.master_addr.empty()) throw UserError("--master_addr is empty");
  if (o.master_port < 0 || o.master_port > 65535) {
    throw UserError("--master_port=" + std::to_string(o.master_port) + " must be between 0 (pick a free one) and 65535");
  }
  if (!std::isfinite(o.timeout_s) || o.timeout_s < 0) {
    throw UserError("--timeout_s=" + FormatSeconds(o.timeout_s) + " must be >= 0 (0 = no timeout)");
  }
  if (!std::isfinite(o.grace_s) || o.grace_s < 0) {
    throw UserError("--grace_s=" + FormatSeconds(o.grace_s) + " must be >= 0");
  }
  for (size_t i = 0; i < o.join_ranks.size(); ++i) {
    const int r = o.join_ranks[i];
    if (r < 0 || r >= o.nproc_per_node) {
      throw UserError("--join_ranks: rank " + std::to_string(r) + " is not one of ranks 0.." +
                      std::to_string(o.nproc_per_node - 1) + " (--nproc_per_node=" + std::to_string(o.nproc_per_node) + ")");
    }
    for (size_t j = 0; j < i; ++j) {
      if (o.join_ranks[j] == r) throw UserError("--join_ranks: rank " + std::to_string(r) + " is listed twice");
    }
  }
  if (o.command.empty() || o.command[0].empty()) {
    throw UserError("no command to launch: usage: launch --nproc_per_node=N [flags] -- BINARY [ARGS...]");
  }
}

std::string ResolveExecutable(const std::string& command0, const std::string& working_dir) {
  auto check = [](const std::string& path) -> std::string {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return Errno();
    if (S_ISDIR(st.st_mode)) return "it is a directory";
    if (access(path.c_str(), X_OK) != 0) return "it is not executable";
    return "";
  };
  if (command0.find('/') != std::string::npos) {
    std::string path = JoinPath(working_dir, command0);
    std::string problem = check(path);
    if (!problem.empty()) {
      std::string where = path == command0 ? "" : " (from " + working_dir + ")";
      throw UserError("cannot run " + path + where + ": " + problem);
    }
    return path;
  }
  const char* path_env = std::getenv("PATH");
  std::string dirs = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(begin, end - begin);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + command0;
    if (check(candidate).empty()) return candidate;
    begin = end + 1;
  }
  throw UserError("command '" + command0 + "' not found on PATH (give a path, e.g. ./" + command0 + ")");
}

int PickFreePort(const std::string& addr) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(addr.c_str(), "0", &hints, &found);
  if (rc != 0) throw UserError("--master_addr=" + addr + ": " + gai_strerror(rc));
  std::string last_error = "no address";
  int port = -1;
  for (addrinfo* ai = found; ai != nullptr && port < 0; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = Errno();
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
      port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    } else {
      last_error = Errno();
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (port <= 0) {
    throw UserError("--master_addr=" + addr + ": cannot pick a free port there (" + last_error +
                    "); is it an address of this machine? Otherwise give --master_port");
  }
  return port;
}

}  // namespace distlm::tools
