// Small helpers the launcher's files share (//tools:launcher only; not a public API): errno and
// signal names for one-line messages, and descriptor writes that survive short writes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace distlm::tools::launch_internal {

// strerror(errno), read at the call.
std::string Errno();

// "%g": 5 -> "5", 0.5 -> "0.5"; how the launcher prints --timeout_s and --grace_s.
std::string FormatSeconds(double s);

// "SIGTERM", or "signal N" for a number without a name.
std::string SignalName(int signo);

// path itself when absolute or dir is empty, else dir/path.
std::string JoinPath(const std::string& dir, const std::string& path);

// Writes all of data, retrying short writes (and waiting on a non-blocking descriptor that is
// full); false when the descriptor is gone (EPIPE, ...).
bool WriteAll(int fd, const char* data, size_t size);
bool WriteAll(int fd, const std::string& s);

// Closes fd when open and marks it closed (-1), so a second call is harmless.
void CloseFd(int& fd);

// "0, 1, 3": ranks as the launcher's messages list them.
std::string RankList(const std::vector<int>& ranks);

}  // namespace distlm::tools::launch_internal
