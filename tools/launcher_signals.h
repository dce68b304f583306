// The launcher's signal handling (//tools:launcher only): while Launch() runs, SIGINT, SIGTERM
// and SIGHUP become bytes in a pipe its poll loop reads, so a signal is acted on between two
// steps of the loop and never inside one; SIGPIPE is ignored and SIGCHLD default.
#pragma once

#include <signal.h>

#include <utility>
#include <vector>

namespace distlm::tools::launch_internal {

// The signals a launcher forwards to its ranks' process groups.
inline constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Installs the launcher's signal dispositions for the duration of Launch() and restores the
// caller's afterwards. A forwarded signal the caller ignores stays ignored (nohup's SIGHUP, a
// background job's SIGINT), for the launcher and, as usual, for the ranks.
class SignalScope {
 public:
  explicit SignalScope(bool forward);
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  int read_fd() const { return pipe_[0]; }

  // Resets, in a child about to exec, every disposition this scope changed to what the caller
  // had: ignored stays ignored, anything else becomes the default (exec would drop a handler
  // anyway, and ours must not run in a child). Async-signal-safe.
  void RestoreInChild() const;

  // Signals that arrived since the last call, in order.
  std::vector<int> Take();

 private:
  void Install(int signo, const struct sigaction& sa);

  int pipe_[2] = {-1, -1};
  std::vector<std::pair<int, struct sigaction>> saved_;
};

// Blocks the forwarded signals across fork(), so that no handler runs in a child before exec
// (it would write into the launcher's signal pipe); the child restores defaults, then unblocks.
class BlockSignals {
 public:
  BlockSignals();
  ~BlockSignals();
  BlockSignals(const BlockSignals&) = delete;
  BlockSignals& operator=(const BlockSignals&) = delete;

  const sigset_t& old_mask() const { return old_; }

 private:
  sigset_t old_;
};

}  // namespace distlm::tools::launch_internal
