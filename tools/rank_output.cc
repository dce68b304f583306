// A rank's output, relayed line by line: each line goes out in one write(), so lines of ranks
// writing to the same terminal never mix inside a line.
#include <unistd.h>

#include <cerrno>

#include "tools/launched_rank.h"
#include "tools/launcher_util.h"

namespace distlm::tools::launch_internal {

void EmitLine(const LaunchOptions& o, Rank& r, OutputStream& s, const char* data, size_t size) {
  std::string line = "[rank " + std::to_string(r.rank) + (r.joiner ? " joiner] " : "] ");
  line.append(data, size);
  line.push_back('\n');
  WriteAll(s.sink_fd, line);  // a closed sink (EPIPE) only drops output; the ranks go on
  if (r.tee_fd >= 0) {
    if (!WriteAll(r.tee_fd, line.data() + line.size() - size - 1, size + 1)) {
      WriteAll(o.err_fd, "launch: cannot write rank " + std::to_string(r.rank) + "'s log in " + o.tee_dir +
                             " (--tee): " + Errno() + "; no longer teeing it\n");
      CloseFd(r.tee_fd);
    }
  }
}

void ReadStream(const LaunchOptions& o, Rank& r, OutputStream& s) {
  char buf[65536];
  ssize_t n = read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    if (!s.pending.empty()) EmitLine(o, r, s, s.pending.data(), s.pending.size());
    s.pending.clear();
    CloseFd(s.fd);
    return;
  }
  s.pending.append(buf, static_cast<size_t>(n));
  size_t start = 0;
  while (true) {
    size_t nl = s.pending.find('\n', start);
    if (nl == std::string::npos) break;
    // A '\n' beyond kMaxLineBytes still cuts the line into pieces of at most that size.
    while (nl - start > kMaxLineBytes) {
      EmitLine(o, r, s, s.pending.data() + start, kMaxLineBytes);
      start += kMaxLineBytes;
    }
    EmitLine(o, r, s, s.pending.data() + start, nl - start);
    start = nl + 1;
  }
  while (s.pending.size() - start >= kMaxLineBytes) {
    EmitLine(o, r, s, s.pending.data() + start, kMaxLineBytes);
    start += kMaxLineBytes;
  }
  s.pending.erase(0, start);
}

}  // namespace distlm::tools::launch_internal
