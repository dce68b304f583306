// Starting a rank: fork, then in the child only async-signal-safe calls up to execve, with the
// reason of a failed start sent back through a close-on-exec pipe so it becomes a one-line
// UserError in the launcher instead of a rank that exits 127.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "common/runtime/errors.h"
#include "tools/launched_rank.h"
#include "tools/launcher_util.h"

extern char** environ;

namespace distlm::tools::launch_internal {
namespace {

// What the child reports through its close-on-exec pipe when it cannot start the command.
struct ExecFailure {
  int stage;  // 0: chdir(working_dir), 1: execve
  int error;  // errno
};

// Everything the child uses between fork() and execve(), prepared before fork() (allocating is
// not async-signal-safe).
struct ChildPlan {
  const LaunchOptions* options;
  const char* executable;
  char* const* argv;
  char* const* envp;
  const char* workdir;  // null: stay in the launcher's directory
  pid_t parent;
  int stdin_fd, stdout_fd, stderr_fd, report_fd;
  const SignalScope* signals;
  const sigset_t* mask;  // the signal mask to exec with
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

// The child's side of fork(): own process group, death with the launcher, the descriptors and
// signal dispositions of a rank, then exec. Async-signal-safe calls only; never returns.
[[noreturn]] void ExecInChild(const ChildPlan& p) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != p.parent) _exit(127);  // the launcher died before prctl took effect
  MoveFdInChild(p.stdin_fd, 0);
  MoveFdInChild(p.stdout_fd, 1);
  MoveFdInChild(p.stderr_fd, 2);
  p.signals->RestoreInChild();
  sigprocmask(SIG_SETMASK, p.mask, nullptr);
  ExecFailure failure{0, 0};
  if (p.workdir == nullptr || chdir(p.workdir) == 0) {
    if (p.options->exec_rank != nullptr) {
      p.options->exec_rank(p.executable, p.argv, p.envp, p.options->exec_rank_arg);
    } else {
      execve(p.executable, p.argv, p.envp);
    }
    failure.stage = 1;
  }
  failure.error = errno;
  (void)!write(p.report_fd, &failure, sizeof(failure));
  _exit(127);
}

// After fork(): the report pipe closes on a successful execve (close-on-exec) or carries the
// reason the child could not start, which is thrown once the child is reaped.
void AwaitExec(const LaunchOptions& o, const std::string& executable, int report_fd, Rank& r) {
  ExecFailure failure{};
  ssize_t n;
  while ((n = read(report_fd, &failure, sizeof(failure))) < 0 && errno == EINTR) {
  }
  close(report_fd);
  if (n == static_cast<ssize_t>(sizeof(failure))) {
    int status;
    waitpid(r.pid, &status, 0);
    r.exited = true;
    throw UserError(failure.stage == 0 ? "cannot enter " + o.working_dir + ": " +
                                             std::strerror(failure.error)
                                       : "cannot execute " + executable + ": " +
                                             std::strerror(failure.error));
  }
}

}  // namespace

void SpawnRank(const LaunchOptions& o, const std::string& executable, int master_port, int devnull,
               const SignalScope& signals, Rank& r) {
  // Everything the child needs is built before fork(): between fork() and execve() the child
  // may only make async-signal-safe calls, and allocating is not one of them.
  std::vector<std::string> env = RankEnvironment(o, master_port, r.rank);
  std::vector<char*> argv, envp;
  static const std::string kJoin = "--join";
  for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  if (r.joiner) argv.push_back(const_cast<char*>(kJoin.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const char* workdir = o.working_dir.empty() ? nullptr : o.working_dir.c_str();

  int out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) {
    std::string why = Errno();
    for (int* fd : {&out[0], &out[1], &err[0], &err[1], &report[0], &report[1]}) CloseFd(*fd);
    throw UserError("cannot create pipes for rank " + std::to_string(r.rank) + ": " + why +
                    " (too many ranks for ulimit -n?)");
  }
  r.streams[0] = {out[0], o.out_fd, ""};
  r.streams[1] = {err[0], o.err_fd, ""};
  pid_t parent = getpid();
  pid_t pid;
  {
    BlockSignals blocked;
    const ChildPlan plan{&o,     executable.c_str(), argv.data(), envp.data(), workdir,           parent,
                         devnull, out[1],            err[1],      report[1],   &signals, &blocked.old_mask()};
    pid = fork();
    if (pid == 0) ExecInChild(plan);
  }
  int fork_errno = errno;
  close(out[1]);
  close(err[1]);
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    throw UserError("fork() failed for rank " + std::to_string(r.rank) + ": " + std::strerror(fork_errno));
  }
  r.pid = pid;
  setpgid(pid, pid);  // also here, so the group exists whichever of the two runs first
  AwaitExec(o, executable, report[0], r);
  r.group_open = true;
  r.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

}  // namespace distlm::tools::launch_internal
