#include "grading/jail/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <stdexcept>
#include <thread>

#include "grading/jail/loopback_shaping.h"
#include "grading/jail/process_watch.h"
#include "grading/jail/run_cgroup.h"

extern char** environ;

namespace distlm::grading {
namespace {

// What the child reports through the status pipe before exec (CLOEXEC: a successful exec
// closes it, so the parent reads until EOF).
struct ChildStatus {
  char stage;  // 'n': network isolated; 'N': isolation failed; 'j': the jail failed; 'c': chdir failed;
               // 'e': exec failed; 'p': no PID namespace could be had; 's': loopback's rate limited;
               // 'S': limiting it failed; 'g': joining the run's control group failed
  int err;
  const char* what;  // for 'j': the step (a string literal, at the same address in the parent)
};

std::string TempRoot() {
  for (const char* var : {"TEST_TMPDIR", "TMPDIR"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return v;
  }
  return "/tmp";
}

void WriteStatus(int fd, char stage, int err, const char* what = "") {
  ChildStatus s{stage, err, what};
  (void)!write(fd, &s, sizeof(s));
}

// Keeps the head and the tail of a long output: the first lines say what started, the last
// ones how it ended.
std::string ReadBounded(int fd, size_t max_bytes) {
  struct stat st;
  if (fstat(fd, &st) != 0) return "";
  const size_t size = static_cast<size_t>(st.st_size);
  auto read_at = [fd](size_t offset, size_t n) {
    std::string buf(n, '\0');
    ssize_t got = pread(fd, buf.data(), n, static_cast<off_t>(offset));
    buf.resize(got > 0 ? static_cast<size_t>(got) : 0);
    return buf;
  };
  if (size <= max_bytes) return read_at(0, size);
  const size_t head = max_bytes / 4, tail = max_bytes - head;
  return read_at(0, head) + "\n[... " + std::to_string(size - head - tail) + " bytes of output left out ...]\n" +
         read_at(size - tail, tail);
}

// lo's transmitted bytes in the network namespace `netns_fd` names, or -1. Read from a thread
// of its own that enters the namespace (setns moves only the calling thread), through
// /proc/thread-self/net/dev, which shows the namespace of the thread that reads it.
int64_t LoopbackTxBytes(int netns_fd) {
  int64_t bytes = -1;
  std::thread reader([&] {
    if (setns(netns_fd, CLONE_NEWNET) != 0) return;
    std::ifstream in("/proc/thread-self/net/dev");
    std::string line;
    while (std::getline(in, line)) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      name.erase(0, name.find_first_not_of(' '));
      if (name != "lo") continue;
      // rx: bytes packets errs drop fifo frame compressed multicast; then tx: bytes ...
      std::istringstream fields(line.substr(colon + 1));
      int64_t v = 0, tx = -1;
      for (int i = 0; i < 9 && (fields >> v); ++i) {
        if (i == 8) tx = v;
      }
      bytes = tx;
    }
  });
  reader.join();
  return bytes;
}

// Waits for `pid`, reaping every other child meanwhile (orphans of the namespace come here);
// its wait status.
int ReapUntil(pid_t pid) {
  for (;;) {
    int status = 0;
    const pid_t got = waitpid(-1, &status, 0);
    if (got == pid) return status;
    if (got < 0 && errno != EINTR) return 0;
  }
}

// Ends this process as a command with wait status `status` ended: the same exit code, or the
// same signal (re-raised with its default action), so the grader sees what the command did.
[[noreturn]] void EndAs(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    raise(sig);
    _exit(128 + sig);
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

// In a child that has just entered a new PID namespace (its own PID is still the old
// namespace's). Three processes from here: this one waits outside the namespace and ends as
// the command did; its child is the namespace's init (PID 1), root, which mounts the
// namespace's /proc, reaps orphans and, when the command ends, ends too (the kernel then kills
// whatever is left inside); init's child returns from here to become the command. Only system
// calls: other threads of the grader may hold locks.
void BecomeInitOfPidNamespace(const PreparedJail& jail, int status_fd) {
  int relay[2];  // init -> this process: the command's wait status
  if (pipe2(relay, O_CLOEXEC) != 0) {
    WriteStatus(status_fd, 'j', errno, "making a pipe for the PID namespace");
    _exit(126);
  }
  const pid_t init = fork();
  if (init < 0) {
    WriteStatus(status_fd, 'j', errno, "starting the PID namespace's first process");
    _exit(126);
  }
  if (init > 0) {
    close(status_fd);
    close(relay[1]);
    const int init_status = ReapUntil(init);
    int status = 0;
    EndAs(read(relay[0], &status, sizeof(status)) == static_cast<ssize_t>(sizeof(status)) ? status : init_status);
  }
  close(relay[0]);
  const char* what = "";
  if (int err = jail.MountProc(&what); err != 0) {
    WriteStatus(status_fd, 'j', err, what);
    _exit(126);
  }
  const pid_t command = fork();
  if (command < 0) {
    WriteStatus(status_fd, 'j', errno, "starting the command in the PID namespace");
    _exit(126);
  }
  if (command > 0) {
    close(status_fd);
    const int status = ReapUntil(command);
    (void)!write(relay[1], &status, sizeof(status));
    _exit(0);
  }
  close(relay[1]);
}

}  // namespace

std::string SignalName(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGINT: return "SIGINT";
    case SIGPIPE: return "SIGPIPE";
    default: return "signal " + std::to_string(signal);
  }
}

namespace {

// What the child needs, prepared before fork: between fork and exec only system calls are safe
// (other threads may hold the allocator's locks).
struct ChildPlan {
  std::vector<std::string> env_strings;
  std::vector<char*> argv, envp;
  int out_fd = -1;     // stderr, and stdout unless stdout_fd
  int stdout_fd = -1;  // command.stdout_path, or -1
  int status_pipe[2] = {-1, -1};
  const PreparedJail* jail = nullptr;
  bool want_netns = false;
  uint64_t loopback_rate = 0;  // > 0: limit loopback in the new namespace
  const RunCgroup* cgroup = nullptr;  // joined first, so that all the run ever starts is in it
  rlim_t as_limit = 0, fsize_limit = 0;
  const char* cwd = nullptr;
  const tools::NoSpawnFilter* no_spawn = nullptr;
};

// In the child, in the command's new network namespace: loopback limited to the plan's rate.
void ShapeLoopbackIfAsked(const ChildPlan& plan, int status_fd) {
  if (plan.loopback_rate == 0) return;
  const int err = ShapeLoopback(plan.loopback_rate);
  WriteStatus(status_fd, err == 0 ? 's' : 'S', err);
}

// The environment: the grader's, less unset_env, plus the command's and the jail's variables.
void PrepareEnvironment(const SandboxCommand& command, const SandboxLimits& limits, ChildPlan* plan) {
  std::set<std::string> drop(command.unset_env.begin(), command.unset_env.end());
  std::map<std::string, std::string> set_env = command.env;
  if (limits.jail != nullptr) {
    for (const auto& [k, v] : limits.jail->spec().env) set_env[k] = v;
  }
  for (const auto& [k, v] : set_env) drop.insert(k);
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (drop.count(kv.substr(0, kv.find('='))) == 0) plan->env_strings.push_back(kv);
  }
  for (const auto& [k, v] : set_env) plan->env_strings.push_back(k + "=" + v);
  for (const auto& a : command.argv) plan->argv.push_back(const_cast<char*>(a.c_str()));
  plan->argv.push_back(nullptr);
  for (const auto& e : plan->env_strings) plan->envp.push_back(const_cast<char*>(e.c_str()));
  plan->envp.push_back(nullptr);
}

void CloseAll(ChildPlan* plan) {
  for (int* fd : {&plan->out_fd, &plan->stdout_fd, &plan->status_pipe[0], &plan->status_pipe[1]}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

// Output goes to an unlinked temporary file: no pipe to drain while waiting, no size limit the
// child could block on. The status pipe carries what went wrong before exec.
void OpenFiles(const SandboxCommand& command, ChildPlan* plan) {
  std::string tmpl = TempRoot() + "/sandbox_outXXXXXX";
  plan->out_fd = mkostemp(tmpl.data(), O_CLOEXEC);
  if (plan->out_fd < 0) throw std::runtime_error("cannot create a temporary file in " + TempRoot() + ": " + strerror(errno));
  unlink(tmpl.c_str());
  if (!command.stdout_path.empty()) {
    plan->stdout_fd = open(command.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (plan->stdout_fd < 0) {
      const int err = errno;
      CloseAll(plan);
      throw std::runtime_error("cannot create " + command.stdout_path + ": " + strerror(err));
    }
  }
  if (pipe2(plan->status_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    CloseAll(plan);
    throw std::runtime_error(std::string("pipe2: ") + strerror(err));
  }
}

// The child, from fork to exec: its own process group, output, limits, network, jail, folder.
[[noreturn]] void RunChild(const ChildPlan& plan) {
  const int status_fd = plan.status_pipe[1];
  if (plan.cgroup != nullptr) {
    if (int err = plan.cgroup->Join(); err != 0) WriteStatus(status_fd, 'g', err);
  }
  setpgid(0, 0);
  close(plan.status_pipe[0]);
  dup2(plan.stdout_fd >= 0 ? plan.stdout_fd : plan.out_fd, 1);
  dup2(plan.out_fd, 2);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, 0);
  // Restore what a fresh process expects (the grader may run with signals ignored).
  signal(SIGPIPE, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  if (plan.as_limit > 0) {
    rlimit as{plan.as_limit, plan.as_limit};
    setrlimit(RLIMIT_AS, &as);
  }
  if (plan.fsize_limit > 0) {
    rlimit fsize{plan.fsize_limit, plan.fsize_limit};
    setrlimit(RLIMIT_FSIZE, &fsize);
  }
  if (plan.want_netns) {
    int err = unshare(CLONE_NEWNET) == 0 ? LoopbackUp() : errno;
    WriteStatus(status_fd, err == 0 ? 'n' : 'N', err);
    if (err == 0) ShapeLoopbackIfAsked(plan, status_fd);
  }
  if (const PreparedJail* jail = plan.jail; jail != nullptr) {
    const char* what = "";
    bool pid_ns = false;
    if (int err = jail->EnterNamespaces(&what, &pid_ns); err != 0) {
      WriteStatus(status_fd, 'j', err, what);
      _exit(126);
    }
    ShapeLoopbackIfAsked(plan, status_fd);
    if (pid_ns) {
      BecomeInitOfPidNamespace(*jail, status_fd);  // returns in the command's own process
    } else if (jail->spec().level == Isolation::kFull && jail->spec().pid_namespace) {
      WriteStatus(status_fd, 'p', 0);
    }
    if (int err = jail->DropToStudent(&what); err != 0) {
      WriteStatus(status_fd, 'j', err, what);
      _exit(126);
    }
  }
  if (plan.cwd != nullptr && chdir(plan.cwd) != 0) {
    WriteStatus(status_fd, 'c', errno);
    _exit(127);
  }
  if (plan.no_spawn != nullptr) {
    plan.no_spawn->ExecConfined(plan.argv[0], plan.argv.data(), plan.envp.data());
  } else {
    execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  }
  WriteStatus(status_fd, 'e', errno);
  _exit(127);
}

// The child's statuses until exec (the pipe closes then): what the command's output is
// prefixed with, and the isolation it got.
std::string ReadStartStatuses(int fd, const SandboxCommand& command, const ChildPlan& plan, SandboxResult* result,
                              bool* cgroup_join_failed) {
  std::string notes;
  ChildStatus s;
  while (read(fd, &s, sizeof(s)) == static_cast<ssize_t>(sizeof(s))) {
    if (s.stage == 'n') result->network_isolated = true;
    if (s.stage == 'N') result->isolation_note = std::string("could not isolate the network: ") + strerror(s.err);
    if (s.stage == 'j') {
      result->jail_error = std::string(s.what) + " failed: " + strerror(s.err);
      notes += "the sandbox could not start: " + result->jail_error + "\n";
    }
    if (s.stage == 'c') notes += "cannot enter " + command.working_dir + ": " + strerror(s.err) + "\n";
    if (s.stage == 's') result->loopback_rate = plan.loopback_rate;
    if (s.stage == 'S') result->isolation_note = std::string("could not limit loopback's rate: ") + strerror(s.err);
    if (s.stage == 'p') result->isolation_note = "no PID namespace here: the kernel refused one";
    if (s.stage == 'e') notes += "cannot execute " + command.argv[0] + ": " + strerror(s.err) + "\n";
    if (s.stage == 'g') {
      *cgroup_join_failed = true;
      result->accounting_note = std::string("the run could not join its control group: ") + strerror(s.err);
    }
  }
  return notes;
}

// The free space of the student's file system against the jail's budgets, sampled while the
// command runs.
class DiskWatch {
 public:
  explicit DiskWatch(const PreparedJail* jail) {
    if (jail == nullptr || jail->spec().level == Isolation::kNone) return;
    path_ = jail->spec().disk_watch_path;
    bytes_budget_ = jail->spec().disk_bytes;
    inode_budget_ = jail->spec().disk_inodes;
    if ((bytes_budget_ > 0 || inode_budget_ > 0) && !path_.empty()) at_start_ = Now();
    watching_ = at_start_.ok;
  }

  // True once the command has used more than a budget; sets the result's flags.
  bool Exceeded(SandboxResult* result) const {
    if (!watching_) return false;
    const FreeSpace now = Now();
    const bool bytes_over = bytes_budget_ > 0 && now.bytes >= 0 && at_start_.bytes - now.bytes > bytes_budget_;
    // A file system without inode counts (f_favail 0 throughout) never trips this.
    const bool inodes_over =
        inode_budget_ > 0 && at_start_.inodes > 0 && now.inodes >= 0 && at_start_.inodes - now.inodes > inode_budget_;
    if (!bytes_over && !inodes_over) return false;
    result->disk_limit_hit = true;
    result->inode_limit_hit = inodes_over;
    return true;
  }

 private:
  struct FreeSpace {
    int64_t bytes = -1, inodes = -1;
    bool ok = false;
  };
  FreeSpace Now() const {
    struct statvfs v;
    if (statvfs(path_.c_str(), &v) != 0) return {};
    return {static_cast<int64_t>(v.f_bavail) * static_cast<int64_t>(v.f_frsize), static_cast<int64_t>(v.f_favail), true};
  }

  std::string path_;
  int64_t bytes_budget_ = 0, inode_budget_ = 0;
  FreeSpace at_start_;
  bool watching_ = false;
};

// Waits for the command until it ends, passes its deadline or a disk budget; returns its wait
// status. Kills its process group (and, jailed, every process of the student's user) on the way
// out, so nothing it started outlives it.
int WaitForCommand(pid_t pid, const SandboxLimits& limits, std::chrono::steady_clock::time_point start,
                   RunCgroup* cgroup, SandboxResult* result) {
  const bool jailed = limits.jail != nullptr && limits.jail->spec().level != Isolation::kNone;
  const DiskWatch disk(limits.jail);
  ProcessWatch watch(pid, jailed ? static_cast<int64_t>(limits.jail->spec().user.uid) : -1);
  const auto deadline = start + std::chrono::duration<double>(limits.timeout_s);
  int wstatus = 0;
  for (;;) {
    watch.Sample();
    cgroup->Sample();
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + strerror(errno));
    const bool over_disk = disk.Exceeded(result);
    if (over_disk || std::chrono::steady_clock::now() > deadline) {
      result->timed_out = !over_disk;
      kill(-pid, SIGKILL);
      if (over_disk && jailed) KillAllProcessesOf(limits.jail->spec().user.uid);
      while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result->peak_memory_bytes = watch.peak_bytes();
  result->peak_cpu_seconds = watch.peak_cpu_seconds();
  kill(-pid, SIGKILL);  // whatever it left behind in its group
  // and whatever left the group (setsid, daemons): every process of the student's user.
  if (jailed) KillAllProcessesOf(limits.jail->spec().user.uid);
  return wstatus;
}

}  // namespace

SandboxResult RunSandboxed(const SandboxCommand& command, const SandboxLimits& limits) {
  if (command.argv.empty()) throw std::runtime_error("RunSandboxed: empty command");
  SandboxResult result;
  const auto start = std::chrono::steady_clock::now();
  ChildPlan plan;
  PrepareEnvironment(command, limits, &plan);
  OpenFiles(command, &plan);
  plan.jail = limits.jail;
  const bool full_jail = plan.jail != nullptr && plan.jail->spec().level == Isolation::kFull;
  plan.want_netns = limits.isolate_network && !full_jail;  // a full jail makes its own
  if (limits.isolate_network || full_jail) plan.loopback_rate = limits.loopback_rate_bytes_per_s;
  plan.as_limit = limits.address_space_bytes > 0 ? static_cast<rlim_t>(limits.address_space_bytes) : 0;
  plan.fsize_limit = limits.file_size_bytes > 0 ? static_cast<rlim_t>(limits.file_size_bytes) : 0;
  plan.cwd = command.working_dir.empty() ? nullptr : command.working_dir.c_str();
  plan.no_spawn = limits.no_spawn;

  RunCgroup cgroup;  // outlives the run's processes: removed after the last has gone
  if (cgroup.made()) plan.cgroup = &cgroup;
  bool cgroup_join_failed = false;
  pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    CloseAll(&plan);
    throw std::runtime_error(std::string("fork: ") + strerror(err));
  }
  if (pid == 0) RunChild(plan);
  close(plan.status_pipe[1]);
  if (plan.stdout_fd >= 0) close(plan.stdout_fd);
  setpgid(pid, pid);  // also here: whichever runs first, the group exists before any kill

  // Statuses arrive before exec, so this returns as soon as the program starts.
  const std::string notes = ReadStartStatuses(plan.status_pipe[0], command, plan, &result, &cgroup_join_failed);
  close(plan.status_pipe[0]);
  if (full_jail && notes.empty()) result.network_isolated = true;
  // The command's network namespace, held open so that its counters can be read once the
  // command and everything it started have ended (the namespace lives while this fd does).
  int netns_fd = -1;
  if (result.network_isolated) {
    netns_fd = open(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC);
  }
  const int wstatus = WaitForCommand(pid, limits, start, &cgroup, &result);
  if (cgroup.made() && !cgroup_join_failed) {
    result.run_memory_bytes = cgroup.memory_peak_bytes();
    result.run_cpu_seconds = cgroup.CpuSeconds();
  } else if (!cgroup.made()) {
    result.accounting_note = cgroup.why_not();
  }
  if (WIFSIGNALED(wstatus)) {
    result.signal = WTERMSIG(wstatus);
    result.exit_code = 128 + result.signal;
  } else {
    result.exit_code = WEXITSTATUS(wstatus);
  }
  if (netns_fd >= 0) {
    result.loopback_bytes = LoopbackTxBytes(netns_fd);
    close(netns_fd);
  }
  result.output = notes + ReadBounded(plan.out_fd, limits.max_output_bytes);
  close(plan.out_fd);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string MakeTempDir(const std::string& prefix, const std::string& parent) {
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
  }
  std::string tmpl = (parent.empty() ? TempRoot() : parent) + "/" + prefix + "XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("cannot create a directory " + tmpl + ": " + strerror(errno));
  }
  return tmpl;
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace distlm::grading
