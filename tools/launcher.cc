#include "tools/launcher.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "tools/stale_binary.h"

extern char** environ;

namespace distlm::tools {
namespace {

using Clock = std::chrono::steady_clock;

// More ranks than this on one host is a typo, and would run out of file descriptors (three
// per rank) under the usual limit of 1024.
constexpr int kMaxRanks = 256;

// After the last rank exits, how long to keep reading pipes that something outside the ranks'
// process groups still holds open.
constexpr double kDrainAfterExitS = 2.0;

// How often to check what no descriptor signals: whether the processes an exited rank left in
// its group are gone, and rank exits on kernels without pidfds (before 5.3).
constexpr int kPeriodicCheckMs = 20;

std::string Errno() { return std::strerror(errno); }

std::string FormatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

std::string SignalName(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signo);
}

std::string JoinPath(const std::string& dir, const std::string& path) {
  if (dir.empty() || (!path.empty() && path[0] == '/')) return path;
  return dir + "/" + path;
}

// Writes all of data, retrying short writes (and waiting on a non-blocking descriptor that is
// full); false when the descriptor is gone (EPIPE, ...).
bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd p{fd, POLLOUT, 0};
        poll(&p, 1, -1);
        continue;
      }
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteAll(int fd, const std::string& s) { return WriteAll(fd, s.data(), s.size()); }

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// ---- Signals ---------------------------------------------------------------------------------

// The handler's only job: put the signal number into a pipe the main loop polls.
std::atomic<int> g_signal_pipe_write{-1};

void OnForwardedSignal(int signo) {
  int saved_errno = errno;
  int fd = g_signal_pipe_write.load();
  if (fd >= 0) {
    unsigned char byte = static_cast<unsigned char>(signo);
    (void)!write(fd, &byte, 1);
  }
  errno = saved_errno;
}

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Installs the launcher's signal dispositions for the duration of Launch() and restores the
// caller's afterwards. A forwarded signal the caller ignores stays ignored (nohup's SIGHUP, a
// background job's SIGINT), for the launcher and, as usual, for the ranks.
class SignalScope {
 public:
  explicit SignalScope(bool forward) {
    if (pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) throw UserError("pipe() failed: " + Errno());
    struct sigaction sa {};
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = SIG_IGN;
    Install(SIGPIPE, sa);
    sa.sa_handler = SIG_DFL;
    Install(SIGCHLD, sa);
    if (forward) {
      g_signal_pipe_write.store(pipe_[1]);
      sa.sa_handler = OnForwardedSignal;
      sa.sa_flags = SA_RESTART;
      for (int s : kForwardedSignals) {
        struct sigaction current {};
        sigaction(s, nullptr, &current);
        if (current.sa_handler != SIG_IGN) Install(s, sa);
      }
    }
  }
  ~SignalScope() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) sigaction(it->first, &it->second, nullptr);
    g_signal_pipe_write.store(-1);
    CloseFd(pipe_[0]);
    CloseFd(pipe_[1]);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  int read_fd() const { return pipe_[0]; }

  // Resets, in a child about to exec, every disposition this scope changed to what the caller
  // had: ignored stays ignored, anything else becomes the default (exec would drop a handler
  // anyway, and ours must not run in a child). Async-signal-safe.
  void RestoreInChild() const {
    for (const auto& [signo, old] : saved_) {
      struct sigaction sa {};
      sigemptyset(&sa.sa_mask);
      sa.sa_handler = old.sa_handler == SIG_IGN ? SIG_IGN : SIG_DFL;
      sigaction(signo, &sa, nullptr);
    }
  }

  // Signals that arrived since the last call, in order.
  std::vector<int> Take() {
    std::vector<int> out;
    unsigned char buf[64];
    ssize_t n;
    while ((n = read(pipe_[0], buf, sizeof(buf))) > 0) out.insert(out.end(), buf, buf + n);
    return out;
  }

 private:
  void Install(int signo, const struct sigaction& sa) {
    struct sigaction old {};
    sigaction(signo, &sa, &old);
    saved_.emplace_back(signo, old);
  }

  int pipe_[2] = {-1, -1};
  std::vector<std::pair<int, struct sigaction>> saved_;
};

// Blocks the forwarded signals across fork(), so that no handler runs in a child before exec
// (it would write into the launcher's signal pipe); the child restores defaults, then unblocks.
class BlockSignals {
 public:
  BlockSignals() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : kForwardedSignals) sigaddset(&set, s);
    sigprocmask(SIG_BLOCK, &set, &old_);
  }
  ~BlockSignals() { sigprocmask(SIG_SETMASK, &old_, nullptr); }
  const sigset_t& old_mask() const { return old_; }

 private:
  sigset_t old_;
};

// ---- Ranks and their output -------------------------------------------------------------------

struct OutputStream {
  int fd = -1;          // read end of the pipe; -1 once closed
  int sink_fd = -1;     // out_fd or err_fd
  std::string pending;  // bytes after the last '\n'
};

struct Rank {
  int rank = 0;
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

// What the child reports through its close-on-exec pipe when it cannot start the command.
struct ExecFailure {
  int stage;  // 0: chdir(working_dir), 1: execve
  int error;  // errno
};

// Duplicates src onto dst for the child, clearing close-on-exec when they are the same fd.
// Async-signal-safe.
void MoveFdInChild(int src, int dst) {
  if (src == dst) {
    fcntl(dst, F_SETFD, 0);
  } else {
    dup2(src, dst);
  }
}

std::vector<std::string> RankEnvironment(const LaunchOptions& o, int master_port, int rank) {
  std::map<std::string, std::string> ours = {
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(rank)},
      {"GROUP_RANK", "0"},
      {"WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
  };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (ours.count(kv.substr(0, kv.find('='))) == 0) env.push_back(kv);
  }
  for (const auto& [k, v] : ours) env.push_back(k + "=" + v);
  return env;
}

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
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
    for (int r = 0; r < o_.nproc_per_node; ++r) {
      ranks_[r].rank = r;
      if (!o_.tee_dir.empty()) OpenTee(ranks_[r]);
    }
    for (Rank& r : ranks_) Spawn(r);
    if (o_.after_start != nullptr) o_.after_start(o_.after_start_arg);
    Message("launch: started " + std::to_string(o_.nproc_per_node) + " rank(s) of " + executable_ +
            " (MASTER_ADDR=" + o_.master_addr + " MASTER_PORT=" + std::to_string(master_port_) + ")");
    return Loop();
  }

 private:
  void Message(const std::string& line) { WriteAll(o_.err_fd, line + "\n"); }

  void OpenTee(Rank& r) {
    std::string path = JoinPath(o_.tee_dir, "rank_" + std::to_string(r.rank) + ".log");
    r.tee_fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (r.tee_fd < 0) throw UserError("cannot create " + path + " (--tee): " + Errno());
  }

  void Spawn(Rank& r) {
    // Everything the child needs is built before fork(): between fork() and execve() the child
    // may only make async-signal-safe calls, and allocating is not one of them.
    std::vector<std::string> env = RankEnvironment(o_, master_port_, r.rank);
    std::vector<char*> argv, envp;
    for (const std::string& a : o_.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const char* workdir = o_.working_dir.empty() ? nullptr : o_.working_dir.c_str();

    int out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) {
      std::string why = Errno();
      for (int* fd : {&out[0], &out[1], &err[0], &err[1], &report[0], &report[1]}) CloseFd(*fd);
      throw UserError("cannot create pipes for rank " + std::to_string(r.rank) + ": " + why +
                      " (too many ranks for ulimit -n?)");
    }
    r.streams[0] = {out[0], o_.out_fd, ""};
    r.streams[1] = {err[0], o_.err_fd, ""};
    pid_t parent = getpid();
    pid_t pid;
    {
      BlockSignals blocked;
      pid = fork();
      if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);  // the launcher died before prctl took effect
        MoveFdInChild(devnull_, 0);
        MoveFdInChild(out[1], 1);
        MoveFdInChild(err[1], 2);
        signals_->RestoreInChild();
        sigprocmask(SIG_SETMASK, &blocked.old_mask(), nullptr);
        ExecFailure failure{0, 0};
        if (workdir == nullptr || chdir(workdir) == 0) {
          if (o_.exec_rank != nullptr) {
            o_.exec_rank(executable_.c_str(), argv.data(), envp.data(), o_.exec_rank_arg);
          } else {
            execve(executable_.c_str(), argv.data(), envp.data());
          }
          failure.stage = 1;
        }
        failure.error = errno;
        (void)!write(report[1], &failure, sizeof(failure));
        _exit(127);
      }
    }
    int fork_errno = errno;
    close(out[1]);
    close(err[1]);
    close(report[1]);
    if (pid < 0) {
      close(report[0]);
      throw UserError("fork() failed for rank " + std::to_string(r.rank) + ": " +
                      std::strerror(fork_errno));
    }
    r.pid = pid;
    setpgid(pid, pid);  // also here, so the group exists whichever of the two runs first
    // The report pipe closes on a successful execve (close-on-exec) or carries the reason.
    ExecFailure failure{};
    ssize_t n;
    while ((n = read(report[0], &failure, sizeof(failure))) < 0 && errno == EINTR) {
    }
    close(report[0]);
    if (n == static_cast<ssize_t>(sizeof(failure))) {
      int status;
      waitpid(pid, &status, 0);
      r.exited = true;
      throw UserError(failure.stage == 0 ? "cannot enter " + o_.working_dir + ": " +
                                               std::strerror(failure.error)
                                         : "cannot execute " + executable_ + ": " +
                                               std::strerror(failure.error));
    }
    r.group_open = true;
    r.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
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

  Clock::time_point GraceFromNow() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.grace_s));
  }

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

  void EmitLine(Rank& r, OutputStream& s, const char* data, size_t size) {
    std::string line = "[rank " + std::to_string(r.rank) + "] ";
    line.append(data, size);
    line.push_back('\n');
    WriteAll(s.sink_fd, line);  // a closed sink (EPIPE) only drops output; the ranks go on
    if (r.tee_fd >= 0) {
      if (!WriteAll(r.tee_fd, line.data() + line.size() - size - 1, size + 1)) {
        Message("launch: cannot write rank " + std::to_string(r.rank) + "'s log in " + o_.tee_dir +
                " (--tee): " + Errno() + "; no longer teeing it");
        CloseFd(r.tee_fd);
      }
    }
  }

  // Reads what is available; on end of file flushes the unterminated last line.
  void ReadStream(Rank& r, OutputStream& s) {
    char buf[65536];
    ssize_t n = read(s.fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      if (!s.pending.empty()) EmitLine(r, s, s.pending.data(), s.pending.size());
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
        EmitLine(r, s, s.pending.data() + start, kMaxLineBytes);
        start += kMaxLineBytes;
      }
      EmitLine(r, s, s.pending.data() + start, nl - start);
      start = nl + 1;
    }
    while (s.pending.size() - start >= kMaxLineBytes) {
      EmitLine(r, s, s.pending.data() + start, kMaxLineBytes);
      start += kMaxLineBytes;
    }
    s.pending.erase(0, start);
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
      if (got < 0) {
        Message("launch: lost track of rank " + std::to_string(r.rank) + ": waitpid: " + wait_error);
        exit_code_ = 1;
      } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        Message("launch: rank " + std::to_string(r.rank) + " exited with code " +
                std::to_string(WEXITSTATUS(status)));
        exit_code_ = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        Message("launch: rank " + std::to_string(r.rank) + " was killed by signal " +
                std::to_string(WTERMSIG(status)) + " (" + SignalName(WTERMSIG(status)) + ")");
        exit_code_ = 128 + WTERMSIG(status);
      } else {
        // Exited 0: done. What it started and left behind gets the same end as a teardown.
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

  int Loop() {
    std::optional<Clock::time_point> deadline;
    if (o_.timeout_s > 0) {
      deadline = Clock::now() +
                 std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.timeout_s));
    }
    std::optional<Clock::time_point> drain_until;
    while (true) {
      bool all_gone = std::none_of(ranks_.begin(), ranks_.end(), [&](const Rank& r) { return Alive(r); });
      bool any_stream = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) {
        return r.streams[0].fd >= 0 || r.streams[1].fd >= 0;
      });
      if (all_gone && !any_stream) break;
      if (all_gone && !drain_until) {
        drain_until = Clock::now() +
                      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kDrainAfterExitS));
      }

      // Wait for output, an exit, a signal, or the next deadline.
      std::vector<pollfd> fds;
      std::vector<std::pair<Rank*, OutputStream*>> stream_of;  // parallel to fds, null for others
      fds.push_back({signals_->read_fd(), POLLIN, 0});
      stream_of.push_back({nullptr, nullptr});
      bool periodic = false;  // something only a periodic check notices
      std::optional<Clock::time_point> wake;
      auto consider = [&](const std::optional<Clock::time_point>& t) {
        if (t && (!wake || *t < *wake)) wake = t;
      };
      for (Rank& r : ranks_) {
        for (OutputStream& s : r.streams) {
          if (s.fd < 0) continue;
          fds.push_back({s.fd, POLLIN, 0});
          stream_of.push_back({&r, &s});
        }
        if (!r.exited && r.pidfd >= 0) {
          fds.push_back({r.pidfd, POLLIN, 0});
          stream_of.push_back({nullptr, nullptr});
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
      int timeout_ms = -1;
      if (wake) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*wake - Clock::now()).count() + 1;
        timeout_ms = static_cast<int>(std::clamp<long long>(ms, 0, 1 << 30));
      }
      if (periodic && (timeout_ms < 0 || timeout_ms > kPeriodicCheckMs)) timeout_ms = kPeriodicCheckMs;
      int ready = poll(fds.data(), fds.size(), timeout_ms);
      if (ready < 0 && errno != EINTR) throw std::runtime_error("launch: poll() failed: " + Errno());

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
      if (ready > 0) {
        for (size_t i = 0; i < fds.size(); ++i) {
          if (stream_of[i].first != nullptr && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
            ReadStream(*stream_of[i].first, *stream_of[i].second);
          }
        }
      }
      Reap();

      Clock::time_point now = Clock::now();
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
      CheckLeftovers(now);
      if (drain_until && now >= *drain_until) {
        for (Rank& r : ranks_) {
          for (OutputStream& s : r.streams) {
            if (s.fd < 0) continue;
            Message("launch: rank " + std::to_string(r.rank) +
                    "'s output is still held open by a process that left its group; not waiting for it");
            if (!s.pending.empty()) EmitLine(r, s, s.pending.data(), s.pending.size());
            CloseFd(s.fd);
          }
        }
      }
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
