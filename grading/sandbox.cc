#include "grading/sandbox.h"

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

extern char** environ;

namespace distlm::grading {
namespace {

// What the child reports through the status pipe before exec (CLOEXEC: a successful exec
// closes it, so the parent reads until EOF).
struct ChildStatus {
  char stage;  // 'n': network isolated; 'N': isolation failed; 'j': the jail failed; 'c': chdir failed;
               // 'e': exec failed; 'p': no PID namespace could be had
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

SandboxResult RunSandboxed(const SandboxCommand& command, const SandboxLimits& limits) {
  if (command.argv.empty()) throw std::runtime_error("RunSandboxed: empty command");
  SandboxResult result;
  const auto start = std::chrono::steady_clock::now();

  // Everything the child needs is prepared before fork: between fork and exec only system
  // calls are safe (other threads may hold the allocator's locks).
  std::set<std::string> drop(command.unset_env.begin(), command.unset_env.end());
  std::map<std::string, std::string> set_env = command.env;
  if (limits.jail != nullptr) {
    for (const auto& [k, v] : limits.jail->spec().env) set_env[k] = v;
  }
  for (const auto& [k, v] : set_env) drop.insert(k);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (drop.count(kv.substr(0, kv.find('='))) == 0) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : set_env) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (const auto& a : command.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // Output goes to an unlinked temporary file: no pipe to drain while waiting, no size limit
  // the child could block on.
  std::string tmpl = TempRoot() + "/sandbox_outXXXXXX";
  int out_fd = mkostemp(tmpl.data(), O_CLOEXEC);
  if (out_fd < 0) throw std::runtime_error("cannot create a temporary file in " + TempRoot() + ": " + strerror(errno));
  unlink(tmpl.c_str());
  int stdout_fd = -1;
  if (!command.stdout_path.empty()) {
    stdout_fd = open(command.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (stdout_fd < 0) {
      close(out_fd);
      throw std::runtime_error("cannot create " + command.stdout_path + ": " + strerror(errno));
    }
  }
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    if (stdout_fd >= 0) close(stdout_fd);
    close(out_fd);
    throw std::runtime_error(std::string("pipe2: ") + strerror(errno));
  }
  const PreparedJail* jail = limits.jail;
  const bool jailed = jail != nullptr && jail->spec().level != Isolation::kNone;
  const bool full_jail = jailed && jail->spec().level == Isolation::kFull;
  // A full jail makes its own network namespace.
  const bool want_netns = limits.isolate_network && !full_jail;
  const rlim_t as_limit = limits.address_space_bytes > 0 ? static_cast<rlim_t>(limits.address_space_bytes) : 0;
  const rlim_t fsize_limit = limits.file_size_bytes > 0 ? static_cast<rlim_t>(limits.file_size_bytes) : 0;
  const char* cwd = command.working_dir.empty() ? nullptr : command.working_dir.c_str();

  pid_t pid = fork();
  if (pid < 0) {
    if (stdout_fd >= 0) close(stdout_fd);
    close(out_fd);
    close(status_pipe[0]);
    close(status_pipe[1]);
    throw std::runtime_error(std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);
    close(status_pipe[0]);
    dup2(stdout_fd >= 0 ? stdout_fd : out_fd, 1);
    dup2(out_fd, 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    // Restore what a fresh process expects (the grader may run with signals ignored).
    signal(SIGPIPE, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    if (as_limit > 0) {
      rlimit as{as_limit, as_limit};
      setrlimit(RLIMIT_AS, &as);
    }
    if (fsize_limit > 0) {
      rlimit fsize{fsize_limit, fsize_limit};
      setrlimit(RLIMIT_FSIZE, &fsize);
    }
    if (want_netns) {
      int err = unshare(CLONE_NEWNET) == 0 ? LoopbackUp() : errno;
      WriteStatus(status_pipe[1], err == 0 ? 'n' : 'N', err);
    }
    if (jail != nullptr) {
      const char* what = "";
      bool pid_ns = false;
      if (int err = jail->EnterNamespaces(&what, &pid_ns); err != 0) {
        WriteStatus(status_pipe[1], 'j', err, what);
        _exit(126);
      }
      if (pid_ns) {
        BecomeInitOfPidNamespace(*jail, status_pipe[1]);  // returns in the command's own process
      } else if (jail->spec().level == Isolation::kFull && jail->spec().pid_namespace) {
        WriteStatus(status_pipe[1], 'p', 0);
      }
      if (int err = jail->DropToStudent(&what); err != 0) {
        WriteStatus(status_pipe[1], 'j', err, what);
        _exit(126);
      }
    }
    if (cwd != nullptr && chdir(cwd) != 0) {
      WriteStatus(status_pipe[1], 'c', errno);
      _exit(127);
    }
    if (limits.no_spawn != nullptr) {
      limits.no_spawn->ExecConfined(argv[0], argv.data(), envp.data());
    } else {
      execve(argv[0], argv.data(), envp.data());
    }
    WriteStatus(status_pipe[1], 'e', errno);
    _exit(127);
  }
  close(status_pipe[1]);
  if (stdout_fd >= 0) close(stdout_fd);
  setpgid(pid, pid);  // also here: whichever runs first, the group exists before any kill

  // Statuses arrive before exec, so this returns as soon as the program starts.
  std::string notes;
  ChildStatus s;
  while (read(status_pipe[0], &s, sizeof(s)) == static_cast<ssize_t>(sizeof(s))) {
    if (s.stage == 'n') result.network_isolated = true;
    if (s.stage == 'N') result.isolation_note = std::string("could not isolate the network: ") + strerror(s.err);
    if (s.stage == 'j') {
      result.jail_error = std::string(s.what) + " failed: " + strerror(s.err);
      notes += "the sandbox could not start: " + result.jail_error + "\n";
    }
    if (s.stage == 'c') notes += "cannot enter " + command.working_dir + ": " + strerror(s.err) + "\n";
    if (s.stage == 'p') result.isolation_note = "no PID namespace here: the kernel refused one";
    if (s.stage == 'e') notes += "cannot execute " + command.argv[0] + ": " + strerror(s.err) + "\n";
  }
  close(status_pipe[0]);
  if (full_jail && notes.empty()) result.network_isolated = true;
  // The command's network namespace, held open so that its counters can be read once the
  // command and everything it started have ended (the namespace lives while this fd does).
  int netns_fd = -1;
  if (result.network_isolated) {
    netns_fd = open(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC);
  }

  // Disk: the free space of the student's file system, sampled while it runs.
  const std::string& watch = jailed ? jail->spec().disk_watch_path : std::string();
  const int64_t disk_budget = jailed ? jail->spec().disk_bytes : 0;
  const int64_t inode_budget = jailed ? jail->spec().disk_inodes : 0;
  struct FreeSpace {
    int64_t bytes = -1, inodes = -1;
  };
  auto free_space = [&watch]() -> FreeSpace {
    struct statvfs v;
    if (statvfs(watch.c_str(), &v) != 0) return {};
    return {static_cast<int64_t>(v.f_bavail) * static_cast<int64_t>(v.f_frsize), static_cast<int64_t>(v.f_favail)};
  };
  const bool watching = (disk_budget > 0 || inode_budget > 0) && !watch.empty();
  const FreeSpace at_start = watching ? free_space() : FreeSpace{};

  const auto deadline = start + std::chrono::duration<double>(limits.timeout_s);
  int wstatus = 0;
  for (;;) {
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + strerror(errno));
    if (watching) {
      const FreeSpace now = free_space();
      const bool bytes_over = disk_budget > 0 && at_start.bytes >= 0 && now.bytes >= 0 && at_start.bytes - now.bytes > disk_budget;
      // A file system without inode counts (f_favail 0 throughout) never trips this.
      const bool inodes_over = inode_budget > 0 && at_start.inodes > 0 && now.inodes >= 0 && at_start.inodes - now.inodes > inode_budget;
      if (bytes_over || inodes_over) {
        result.disk_limit_hit = true;
        result.inode_limit_hit = inodes_over;
        kill(-pid, SIGKILL);
        if (jailed) KillAllProcessesOf(jail->spec().user.uid);
        while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
        }
        break;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-pid, SIGKILL);  // whatever it left behind in its group
  // and whatever left the group (setsid, daemons): every process of the student's user.
  if (jailed) KillAllProcessesOf(jail->spec().user.uid);
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
  result.output = notes + ReadBounded(out_fd, limits.max_output_bytes);
  close(out_fd);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

IsolationProbe ProbeIsolation() {
  IsolationProbe probe;
  std::string error;
  if (!FindJailUser(&probe.user, &error)) {
    probe.why_not_user = probe.why_not_full = error;
    return probe;
  }
  if (geteuid() != 0) {
    probe.why_not_user = "the grader runs as uid " + std::to_string(geteuid()) +
                         ", not root, so it cannot run student code as another user";
    probe.why_not_full = probe.why_not_user;
    return probe;
  }
  auto attempt = [&](Isolation level) -> std::string {
    JailSpec spec;
    spec.level = level;
    spec.user = probe.user;
    spec.private_tmp = {"/tmp"};
    PreparedJail jail(spec);
    SandboxCommand c;
    c.argv = {"/bin/true"};
    c.working_dir = "/";
    SandboxLimits limits;
    limits.timeout_s = 30;
    limits.jail = &jail;
    const SandboxResult r = RunSandboxed(c, limits);
    if (!r.jail_error.empty()) return r.jail_error;
    return r.exit_code == 0 ? "" : "a jailed /bin/true exited with " + std::to_string(r.exit_code) + ": " + r.output;
  };
  probe.why_not_full = attempt(Isolation::kFull);
  if (probe.why_not_full.empty()) {
    probe.best = Isolation::kFull;
    return probe;
  }
  probe.why_not_full += " (a container needs CAP_SYS_ADMIN for namespaces: docker run --cap-add=SYS_ADMIN)";
  probe.why_not_user = attempt(Isolation::kUser);
  if (probe.why_not_user.empty()) probe.best = Isolation::kUser;
  return probe;
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
