#include "grading/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace distlm::grading {
namespace {

// What the child reports through the status pipe before exec (CLOEXEC: a successful exec
// closes it, so the parent reads until EOF).
struct ChildStatus {
  char stage;  // 'n': network isolated; 'N': isolation failed; 'c': chdir failed; 'e': exec failed
  int err;
};

std::string TempRoot() {
  for (const char* var : {"TEST_TMPDIR", "TMPDIR"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return v;
  }
  return "/tmp";
}

// Brings the loopback interface up in the current (fresh) network namespace, where it starts
// down. Only system calls: this runs between fork and exec.
int LoopbackUp() {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  ifreq req;
  memset(&req, 0, sizeof(req));
  memcpy(req.ifr_name, "lo", 3);
  int err = 0;
  if (ioctl(fd, SIOCGIFFLAGS, &req) != 0) {
    err = errno;
  } else {
    req.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &req) != 0) err = errno;
  }
  close(fd);
  return err;
}

void WriteStatus(int fd, char stage, int err) {
  ChildStatus s{stage, err};
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
  for (const auto& [k, v] : command.env) drop.insert(k);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (drop.count(kv.substr(0, kv.find('='))) == 0) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : command.env) env_strings.push_back(k + "=" + v);
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
  const bool want_netns = limits.isolate_network;
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
    if (cwd != nullptr && chdir(cwd) != 0) {
      WriteStatus(status_pipe[1], 'c', errno);
      _exit(127);
    }
    execve(argv[0], argv.data(), envp.data());
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
    if (s.stage == 'c') notes += "cannot enter " + command.working_dir + ": " + strerror(s.err) + "\n";
    if (s.stage == 'e') notes += "cannot execute " + command.argv[0] + ": " + strerror(s.err) + "\n";
  }
  close(status_pipe[0]);

  const auto deadline = start + std::chrono::duration<double>(limits.timeout_s);
  int wstatus = 0;
  for (;;) {
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + strerror(errno));
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
  if (WIFSIGNALED(wstatus)) {
    result.signal = WTERMSIG(wstatus);
    result.exit_code = 128 + result.signal;
  } else {
    result.exit_code = WEXITSTATUS(wstatus);
  }
  result.output = notes + ReadBounded(out_fd, limits.max_output_bytes);
  close(out_fd);
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
