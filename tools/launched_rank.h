// One rank of a Launch() (//tools:launcher only): its process, its process group and its two
// output pipes; how it is started, and how its output becomes "[rank R] " lines.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "tools/launcher.h"
#include "tools/launcher_signals.h"

namespace distlm::tools::launch_internal {

using Clock = std::chrono::steady_clock;

struct OutputStream {
  int fd = -1;          // read end of the pipe; -1 once closed
  int sink_fd = -1;     // out_fd or err_fd
  std::string pending;  // bytes after the last '\n'
};

struct Rank {
  int rank = 0;
  bool joiner = false;  // started with --join added, to take rank's place (LaunchOptions::join_ranks)
  pid_t pid = -1;
  int pidfd = -1;  // readable when the rank exits; -1 without pidfd support
  bool exited = false;
  // The rank's process group lives on after the rank while something it started is in it. It
  // is open until found empty or sent SIGKILL; a closed group's number is never signalled
  // again, since the kernel may give it to an unrelated process.
  bool group_open = false;
  std::optional<Clock::time_point> group_kill_at;  // SIGKILL for what an exited rank left
  OutputStream streams[2];  // stdout, stderr
  int tee_fd = -1;
};

// Starts rank r.rank of the command (rank_spawn.cc): its own process group, stdin from devnull,
// stdout and stderr into new pipes (r.streams), the launcher's variables in its environment,
// the caller's signal dispositions (`signals` restores them in the child). Returns once the
// command runs; throws UserError when it cannot be started (r.pid is then set and reaped).
void SpawnRank(const LaunchOptions& o, const std::string& executable, int master_port, int devnull,
               const SignalScope& signals, Rank& r);

// Writes one "[rank R] <data>\n" line to s.sink_fd in one write, and <data>\n to the rank's
// tee file (rank_output.cc). A tee that fails is reported on o.err_fd and closed.
void EmitLine(const LaunchOptions& o, Rank& r, OutputStream& s, const char* data, size_t size);

// Reads what is available on s.fd and emits every complete line (cut at kMaxLineBytes); on end
// of file flushes the unterminated last line and closes s.fd.
void ReadStream(const LaunchOptions& o, Rank& r, OutputStream& s);

}  // namespace distlm::tools::launch_internal
