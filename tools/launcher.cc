// Launch(): the Launcher below starts the ranks (rank_spawn.cc), relays their output
// (rank_output.cc) and supervises them in one poll loop, in one thread: every event (output, a
// rank's exit, a signal, a deadline) is handled between two polls, so no lock is needed and the
// order of what the launcher prints is the order it saw things happen.
#include "tools/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "tools/launched_rank.h"
#include "tools/launcher_signals.h"
#include "tools/launcher_util.h"
#include "tools/stale_binary.h"

namespace distlm::tools {
namespace {

using launch_internal::Clock;
using launch_internal::CloseFd;
using launch_internal::EmitLine;
using launch_internal::Errno;
using launch_internal::FormatSeconds;
using launch_internal::JoinPath;
using launch_internal::OutputStream;
using launch_internal::Rank;
using launch_internal::RankList;
using launch_internal::ReadStream;
using launch_internal::SignalName;
using launch_internal::SignalScope;
using launch_internal::SpawnRank;
using launch_internal::WriteAll;

// After the last rank exits, how long to keep reading pipes that something outside the ranks'
// process groups still holds open.
constexpr double kDrainAfterExitS = 2.0;

// How often to check what no descriptor signals: whether the processes an exited rank left in
// its group are gone, and rank exits on kernels without pidfds (before 5.3).
constexpr int kPeriodicCheckMs = 20;

// Now plus s seconds, on the clock every deadline of the loop uses.
Clock::time_point After(double s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

class Launcher {
 public:
  Launcher(const LaunchOptions& options, std::string executable, int master_port)
      : o_(options), executable_(std::move(executable)), master_port_(master_port) {}

  // Whatever happens (an exception included), no rank outlives the launcher.
  ~Launcher() {
    for (Rank& r : ranks_) {
      if (r.pid > 0 && !r.exited) {
        Signal(r, SIGKILL);
        int status;
        while (waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
        }
        r.exited = true;
      }
      if (r.group_open) kill(-r.pid, SIGKILL);
      CloseFd(r.pidfd);
      CloseFd(r.streams[0].fd);
      CloseFd(r.streams[1].fd);
      CloseFd(r.tee_fd);
    }
    CloseFd(devnull_);
  }

  int Run() {
    signals_.emplace(o_.forward_signals);
    devnull_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull_ < 0) throw UserError("cannot open /dev/null: " + Errno());
    ranks_.resize(o_.nproc_per_node);
    for (int r = 0; r < o_.nproc_per_node; ++r) ranks_[r].rank = r;
    for (int r : o_.join_ranks) {
      ranks_.emplace_back();
      ranks_.back().rank = r;
      ranks_.back().joiner = true;
    }
    if (!o_.tee_dir.empty()) {
      for (Rank& r : ranks_) OpenTee(r);
    }
    for (Rank& r : ranks_) SpawnRank(o_, executable_, master_port_, devnull_, *signals_, r);
    if (o_.after_start != nullptr) o_.after_start(o_.after_start_arg);
    Message("launch: started " + std::to_string(o_.nproc_per_node) + " rank(s) of " + executable_ +
            (o_.join_ranks.empty() ? "" : " and a joiner of rank(s) " + RankList(o_.join_ranks)) +
            " (MASTER_ADDR=" + o_.master_addr + " MASTER_PORT=" + std::to_string(master_port_) + ")");
    return Loop();
  }

 private:
  // What one turn of the loop waits on: the signal pipe, every open output pipe and the pidfd
  // of every running rank; and for how long: until the next deadline, or kPeriodicCheckMs when
  // something only a periodic check notices is pending.
  struct PollSet {
    std::vector<pollfd> fds;
    std::vector<std::pair<Rank*, OutputStream*>> stream_of;  // parallel to fds, null for others
    int timeout_ms = -1;
  };

  void Message(const std::string& line) { WriteAll(o_.err_fd, line + "\n"); }

  void OpenTee(Rank& r) {
    std::string path = JoinPath(o_.tee_dir, "rank_" + std::to_string(r.rank) + (r.joiner ? "_joiner" : "") + ".log");
    r.tee_fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (r.tee_fd < 0) throw UserError("cannot create " + path + " (--tee): " + Errno());
  }

  // Sends signo to the rank's process group: the rank and what it started, or what is left
  // of that after the rank exited. A running rank that moved to a group of its own is
  // signalled alone.
  void Signal(Rank& r, int signo) {
    bool group_reached = r.group_open && kill(-r.pid, signo) == 0;
    if (r.exited) {
      // Empty, or SIGKILLed: either way nothing more to be done.
      if (!group_reached || signo == SIGKILL) r.group_open = false;
    } else if (!group_reached || getpgid(r.pid) != r.pid) {
      kill(r.pid, signo);
    }
  }

  bool Alive(const Rank& r) const { return !r.exited || r.group_open; }

  // Closes the groups of exited ranks that have emptied; SIGKILLs those whose grace is over.
  void CheckLeftovers(Clock::time_point now) {
    for (Rank& r : ranks_) {
      if (!r.exited || !r.group_open) continue;
      if (kill(-r.pid, 0) != 0) {
        r.group_open = false;
      } else if (r.group_kill_at && now >= *r.group_kill_at) {
        if (!killed_) {
          Message("launch: processes started by rank " + std::to_string(r.rank) + " still running " +
                  FormatSeconds(o_.grace_s) + " s after it exited and they got SIGTERM (--grace_s); sending SIGKILL");
        }
        Signal(r, SIGKILL);
      }
    }
  }

  Clock::time_point GraceFromNow() const { return After(o_.grace_s); }

  std::vector<int> RunningRanks() const {
    std::vector<int> out;
    for (const Rank& r : ranks_) {
      if (!r.exited) out.push_back(r.rank);
    }
    return out;
  }

  void StartTeardown(int signo) {
    stopping_ = true;
    std::vector<int> running = RunningRanks();
    for (Rank& r : ranks_) {
      if (Alive(r)) Signal(r, signo);
    }
    if (!running.empty()) {
      Message("launch: stopping rank(s) " + RankList(running) + " (" + SignalName(signo) +
              ", SIGKILL after " + FormatSeconds(o_.grace_s) + " s)");
    }
    kill_at_ = GraceFromNow();
  }

  void KillAll() {
    if (killed_) return;
    killed_ = true;
    for (Rank& r : ranks_) {
      if (Alive(r)) Signal(r, SIGKILL);
    }
  }

  // Collects the exit of every rank that has ended; reports the first failure.
  void Reap() {
    for (Rank& r : ranks_) {
      if (r.exited) continue;
      int status = 0;
      pid_t got = waitpid(r.pid, &status, WNOHANG);
      std::string wait_error = got < 0 ? Errno() : "";
      if (got == 0 || (got < 0 && errno == EINTR)) continue;
      r.exited = true;
      CloseFd(r.pidfd);
      if (kill(-r.pid, 0) != 0) r.group_open = false;
      if (stopping_) {
        // Its group already got the stop signal; what is left of it shares the deadline.
        r.group_kill_at = killed_ ? Clock::now() : kill_at_;
        continue;
      }
      // A rank with a joiner: its end, whatever it is, leaves the job to the joiner.
      const bool replaced = !r.joiner && HasJoiner(r.rank);
      // How it ended, said as its failure, or as the joiner's turn.
      auto report = [&](const std::string& end) {
        Message(replaced ? JoinerTakesPlaceLine(r.rank, end) : "launch: " + Who(r) + " " + end);
      };
      bool goes_on = false;  // an end that leaves the job running: exit 0, or a rank its joiner replaces
      if (got < 0) {
        Message("launch: lost track of rank " + std::to_string(r.rank) + ": waitpid: " + wait_error);
        exit_code_ = 1;
      } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        report("exited with code " + std::to_string(WEXITSTATUS(status)));
        if (!replaced) exit_code_ = WEXITSTATUS(status);
        goes_on = replaced;
      } else if (WIFSIGNALED(status)) {
        report("was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + SignalName(WTERMSIG(status)) + ")");
        if (!replaced) exit_code_ = 128 + WTERMSIG(status);
        goes_on = replaced;
      } else {
        goes_on = true;  // exited 0: done
      }
      if (goes_on) {
        // What it started and left behind gets the same end as a teardown.
        if (r.group_open) {
          Signal(r, SIGTERM);
          r.group_kill_at = GraceFromNow();
        }
        continue;
      }
      StartTeardown(SIGTERM);  // this rank's leftovers included
      r.group_kill_at = kill_at_;
    }
  }

  bool HasJoiner(int rank) const {
    return std::find(o_.join_ranks.begin(), o_.join_ranks.end(), rank) != o_.join_ranks.end();
  }
  static std::string Who(const Rank& r) { return "rank " + std::to_string(r.rank) + (r.joiner ? "'s joiner" : ""); }

  PollSet WhatToWaitFor(const std::optional<Clock::time_point>& deadline,
                        const std::optional<Clock::time_point>& drain_until) {
    PollSet p;
    p.fds.push_back({signals_->read_fd(), POLLIN, 0});
    p.stream_of.push_back({nullptr, nullptr});
    bool periodic = false;  // something only a periodic check notices
    std::optional<Clock::time_point> wake;
    auto consider = [&](const std::optional<Clock::time_point>& t) {
      if (t && (!wake || *t < *wake)) wake = t;
    };
    for (Rank& r : ranks_) {
      for (OutputStream& s : r.streams) {
        if (s.fd < 0) continue;
        p.fds.push_back({s.fd, POLLIN, 0});
        p.stream_of.push_back({&r, &s});
      }
      if (!r.exited && r.pidfd >= 0) {
        p.fds.push_back({r.pidfd, POLLIN, 0});
        p.stream_of.push_back({nullptr, nullptr});
      } else if (!r.exited) {
        periodic = true;  // no pidfd: poll for the exit
      } else if (r.group_open) {
        periodic = true;  // leftovers: poll for the group to empty
        consider(r.group_kill_at);
      }
    }
    if (!stopping_) consider(deadline);
    if (stopping_ && !killed_) consider(kill_at_);
    consider(drain_until);
    if (wake) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*wake - Clock::now()).count() + 1;
      p.timeout_ms = static_cast<int>(std::clamp<long long>(ms, 0, 1 << 30));
    }
    if (periodic && (p.timeout_ms < 0 || p.timeout_ms > kPeriodicCheckMs)) p.timeout_ms = kPeriodicCheckMs;
    return p;
  }

  // The launcher's own SIGINT/SIGTERM/SIGHUP: the first starts a teardown with that signal, a
  // second one during it sends SIGKILL at once.
  void HandleSignals() {
    for (int signo : signals_->Take()) {
      if (!stopping_) {
        Message("launch: received " + SignalName(signo) + "; forwarding it to the ranks");
        exit_code_ = 128 + signo;
        StartTeardown(signo);
      } else if (!killed_) {
        Message("launch: received " + SignalName(signo) + " again; sending SIGKILL");
        KillAll();
      }
    }
  }

  void ReadReady(const PollSet& p) {
    for (size_t i = 0; i < p.fds.size(); ++i) {
      if (p.stream_of[i].first != nullptr && (p.fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        ReadStream(o_, *p.stream_of[i].first, *p.stream_of[i].second);
      }
    }
  }

  // The deadlines the launcher keeps itself: --timeout_s, then the grace after a stop signal.
  void CheckDeadlines(const std::optional<Clock::time_point>& deadline, Clock::time_point now) {
    if (!stopping_ && deadline && now >= *deadline && !RunningRanks().empty()) {
      Message("launch: timed out after " + FormatSeconds(o_.timeout_s) +
              " s (--timeout_s); ranks still running: " + RankList(RunningRanks()));
      exit_code_ = kTimeoutExitCode;
      StartTeardown(SIGTERM);
    }
    if (stopping_ && !killed_ && now >= kill_at_) {
      std::vector<int> running = RunningRanks();
      if (!running.empty()) {
        Message("launch: rank(s) " + RankList(running) + " still running " + FormatSeconds(o_.grace_s) +
                " s after the stop signal (--grace_s); sending SIGKILL");
      }
      KillAll();
    }
  }

  // Every rank and group is gone, yet a pipe is still open: a process that left its rank's group
  // holds it. Its last partial line is flushed and the pipe given up.
  void StopDraining() {
    for (Rank& r : ranks_) {
      for (OutputStream& s : r.streams) {
        if (s.fd < 0) continue;
        Message("launch: rank " + std::to_string(r.rank) +
                "'s output is still held open by a process that left its group; not waiting for it");
        if (!s.pending.empty()) EmitLine(o_, r, s, s.pending.data(), s.pending.size());
        CloseFd(s.fd);
      }
    }
  }

  int Loop() {
    std::optional<Clock::time_point> deadline;
    if (o_.timeout_s > 0) deadline = After(o_.timeout_s);
    std::optional<Clock::time_point> drain_until;
    while (true) {
      bool all_gone = std::none_of(ranks_.begin(), ranks_.end(), [&](const Rank& r) { return Alive(r); });
      bool any_stream = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) {
        return r.streams[0].fd >= 0 || r.streams[1].fd >= 0;
      });
      if (all_gone && !any_stream) break;
      if (all_gone && !drain_until) drain_until = After(kDrainAfterExitS);

      // Wait for output, an exit, a signal, or the next deadline.
      PollSet p = WhatToWaitFor(deadline, drain_until);
      int ready = poll(p.fds.data(), p.fds.size(), p.timeout_ms);
      if (ready < 0 && errno != EINTR) throw std::runtime_error("launch: poll() failed: " + Errno());

      HandleSignals();
      if (ready > 0) ReadReady(p);
      Reap();

      Clock::time_point now = Clock::now();
      CheckDeadlines(deadline, now);
      CheckLeftovers(now);
      if (drain_until && now >= *drain_until) StopDraining();
    }
    return exit_code_;
  }

  const LaunchOptions& o_;
  const std::string executable_;
  const int master_port_;
  std::optional<SignalScope> signals_;
  int devnull_ = -1;
  std::vector<Rank> ranks_;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point kill_at_;
  int exit_code_ = 0;
};

}  // namespace

int Launch(const LaunchOptions& options) {
  ValidateOptions(options);
  std::string executable = ResolveExecutable(options.command[0], options.working_dir);
  // `bazel run //tools:launch` does not rebuild what follows `--`: say so when the binary
  // predates its package's sources.
  if (auto warning = StaleBinaryWarning(executable, FindWorkspace(options.working_dir.empty() ? "." : options.working_dir))) {
    std::fprintf(stderr, "%s\n", warning->c_str());
  }
  LaunchOptions o = options;
  if (!o.tee_dir.empty()) {
    o.tee_dir = JoinPath(o.working_dir, o.tee_dir);
    MakeDirs(o.tee_dir);
  }
  int port = o.master_port > 0 ? o.master_port : PickFreePort(o.master_addr);
  Launcher launcher(o, executable, port);
  return launcher.Run();
}

}  // namespace distlm::tools
