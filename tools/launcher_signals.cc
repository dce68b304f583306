#include "tools/launcher_signals.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "common/runtime/errors.h"
#include "tools/launcher_util.h"

namespace distlm::tools::launch_internal {
namespace {

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

}  // namespace

SignalScope::SignalScope(bool forward) {
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

SignalScope::~SignalScope() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) sigaction(it->first, &it->second, nullptr);
  g_signal_pipe_write.store(-1);
  CloseFd(pipe_[0]);
  CloseFd(pipe_[1]);
}

void SignalScope::RestoreInChild() const {
  for (const auto& [signo, old] : saved_) {
    struct sigaction sa {};
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = old.sa_handler == SIG_IGN ? SIG_IGN : SIG_DFL;
    sigaction(signo, &sa, nullptr);
  }
}

std::vector<int> SignalScope::Take() {
  std::vector<int> out;
  unsigned char buf[64];
  ssize_t n;
  while ((n = read(pipe_[0], buf, sizeof(buf))) > 0) out.insert(out.end(), buf, buf + n);
  return out;
}

void SignalScope::Install(int signo, const struct sigaction& sa) {
  struct sigaction old {};
  sigaction(signo, &sa, &old);
  saved_.emplace_back(signo, old);
}

BlockSignals::BlockSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kForwardedSignals) sigaddset(&set, s);
  sigprocmask(SIG_BLOCK, &set, &old_);
}

BlockSignals::~BlockSignals() { sigprocmask(SIG_SETMASK, &old_, nullptr); }

}  // namespace distlm::tools::launch_internal
