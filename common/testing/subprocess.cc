#include "common/testing/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace distlm::testing {
namespace {

std::string TempRoot() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string Dirname(const std::string& p) {
  auto pos = p.rfind('/');
  return pos == std::string::npos ? "." : p.substr(0, pos);
}

}  // namespace

std::vector<ProcessResult> RunAll(const std::vector<Command>& commands, double timeout_s) {
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  static int counter = 0;
  for (const Command& c : commands) {
    std::string log = TempRoot() + "/proc_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + ".log";
    logs.push_back(log);
    // Build argv and envp before fork: the child must only call async-signal-safe functions.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      std::string key = kv.substr(0, kv.find('='));
      if (c.env.count(key) == 0) env_strings.push_back(kv);
    }
    for (const auto& [k, v] : c.env) env_strings.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    for (const auto& a : c.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) throw std::runtime_error("cannot create " + log);
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      setpgid(0, 0);
      dup2(fd, 1);
      dup2(fd, 2);
      int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, 0);
      execve(argv[0], argv.data(), envp.data());
      const char msg[] = "execve failed\n";
      (void)!write(2, msg, sizeof(msg) - 1);
      _exit(127);
    }
    close(fd);
    setpgid(pid, pid);
    pids.push_back(pid);
  }

  std::vector<ProcessResult> results(commands.size());
  std::vector<bool> done(commands.size(), false);
  size_t remaining = commands.size();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (remaining > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      pid_t r = waitpid(pids[i], &status, WNOHANG);
      if (r == pids[i]) {
        done[i] = true;
        --remaining;
        results[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        kill(-pids[i], SIGKILL);  // anything the process left behind in its group
      }
    }
    if (remaining == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        kill(-pids[i], SIGKILL);
        int status = 0;
        waitpid(pids[i], &status, 0);
        results[i].timed_out = true;
        results[i].exit_code = 128 + SIGKILL;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t i = 0; i < logs.size(); ++i) {
    results[i].output = ReadFileOrEmpty(logs[i]);
    unlink(logs[i].c_str());
  }
  return results;
}

ProcessResult Run(const Command& command, double timeout_s) { return RunAll({command}, timeout_s)[0]; }

std::string SelfPath() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n > 0 ? n : 0] = '\0';
  return self;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    throw std::runtime_error("bind(127.0.0.1:0) failed");
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

std::string Runfile(const std::string& workspace_relative) {
  for (const char* var : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    if (const char* root = std::getenv(var)) {
      std::string p = std::string(root) + "/distlm/" + workspace_relative;
      if (Exists(p)) return p;
    }
  }
  return workspace_relative;  // run from the workspace root outside Bazel
}

std::string Checkout() {
  std::error_code ec;
  const std::filesystem::path ws = std::filesystem::canonical(Runfile("WORKSPACE"), ec);
  return ec ? "" : ws.parent_path().string();
}

std::optional<std::string> SharedReferenceDir() {
  if (const char* d = std::getenv("DISTLM_SHARED_DIR"); d && *d) {
    std::string p = std::string(d) + "/reference";
    if (Exists(p + "/README.md")) return p;
    if (Exists(std::string(d) + "/README.md") && Exists(std::string(d) + "/bert_tiny_reference")) return std::string(d);
    return std::nullopt;
  }
  // The WORKSPACE runfile is a symlink into the checkout; shared/ sits beside the checkout.
  char resolved[4096];
  std::string ws = Runfile("WORKSPACE");
  if (realpath(ws.c_str(), resolved) == nullptr) return std::nullopt;
  std::string p = Dirname(Dirname(resolved)) + "/shared/reference";
  if (Exists(p + "/README.md")) return p;
  return std::nullopt;
}

std::optional<std::string> PeersDir() {
  const char* d = std::getenv("DISTLM_PEERS_DIR");
  if (d == nullptr || *d == '\0') return std::nullopt;
  return std::string(d);
}

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = TempRoot() + "/" + prefix + "XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
  return buf.data();
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFileMakingDirs(const std::string& path, const std::string& bytes) {
  const std::string dir = Dirname(path);
  if (!dir.empty()) std::filesystem::create_directories(dir);
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace distlm::testing
