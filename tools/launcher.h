// The local multi-rank launcher behind //tools:launch: `torchrun --standalone` for one host.
//
// Launch() starts N copies of a command as ranks 0..N-1, watches them, and returns the exit
// code the launcher should exit with. The contract tests and the grader rely on:
//
// Environment. Each rank gets the parent's environment plus torchrun's variables: RANK and
//   LOCAL_RANK (both R), WORLD_SIZE and LOCAL_WORLD_SIZE (both N), GROUP_RANK=0, MASTER_ADDR,
//   MASTER_PORT. No thread variables are set: the runtime preamble divides the cores by
//   LOCAL_WORLD_SIZE itself. With master_port 0 a port that is free on master_addr is picked
//   once (bind to port 0, read it back, release it) and given to every rank; rank 0's TCPStore
//   binds it moments later. stdin is /dev/null.
//
// Processes. Each rank runs in its own process group, so a signal to a rank reaches the
//   processes it started. Ranks get PR_SET_PDEATHSIG(SIGKILL), so they die if the launcher is
//   killed outright (the kernel sends it when the thread that called Launch() ends, so call
//   it from a thread that outlives the ranks). What a rank's own children do when the launcher
//   is SIGKILLed is up to them: nothing is left to signal them. When a rank exits, whatever it
//   left in its process group gets SIGTERM, and SIGKILL after grace_s; Launch() returns once
//   every group is empty or SIGKILLed, so no rank leaves processes behind.
//
// Output. A rank's stdout and stderr are read through pipes and written, line by line, to
//   out_fd and err_fd respectively as "[rank R] <line>\n", each line in one write, so lines of
//   different ranks never mix inside a line. A last line without '\n' is flushed, with one,
//   when the rank closes its output. A line longer than kMaxLineBytes is cut into pieces of
//   that size, each printed as a line. A rank's stdout is a pipe, so C stdio buffers it in
//   blocks: ranks that want their lines to appear promptly flush them. With tee_dir, rank R's
//   lines (stdout and stderr, without the prefix) are also written to tee_dir/rank_R.log.
//
// Failure and exit codes. A rank that exits 0 is done; the others keep running. The first
//   failure the launcher sees (a non-zero exit or a death by signal; the lowest rank among
//   those it sees at the same moment) is reported on err_fd as
//     launch: rank R exited with code C
//     launch: rank R was killed by signal S (SIGNAME)
//   and then the teardown runs: SIGTERM to every rank's process group, SIGKILL to whatever is
//   left after grace_s. Launch() returns C, or 128 + S for a signal, as a shell would, so the
//   rank's own code (e.g. 2 for a user error) reaches the caller. Other exits:
//     0    every rank exited 0;
//     124  timeout_s passed first (as timeout(1)): "launch: timed out after T s
//          (--timeout_s); ranks still running: 0, 1", then the same teardown;
//     128 + S  the launcher got SIGINT, SIGTERM or SIGHUP (S): it forwards that signal to
//          every rank's process group (as a terminal's Ctrl-C reaches a whole job), then
//          the same teardown. A second such signal during a teardown sends SIGKILL at once.
//     1    the launcher lost track of a rank (waitpid failed: someone else reaped it).
//   Exits and deaths caused by the teardown itself are not reported as failures.
//
// Joiners (join_ranks; task 8's --elastic workers, whose lost slot a late worker takes). For
//   each rank R listed, a second process of rank R is started with the others, its command with
//   --join added; its lines read "[rank R joiner]". It waits to take R's place. The first end of
//   R itself, whatever it is, is reported as "launch: rank R ...; its joiner takes its place" and
//   does not end the job; the joiner's end counts as any rank's.
//
// Errors. Bad options, a command that cannot be found or executed, an unwritable tee_dir or
//   no free port throw distlm::UserError with one line naming the flag or path; no rank is
//   left running when Launch() throws.
//
// One Launch() at a time per process: with forward_signals it owns SIGINT, SIGTERM and SIGHUP
// while it runs; it always makes SIGPIPE ignored (a closed out_fd only drops output) and
// SIGCHLD default (so it can collect exit codes), and restores all of them on return.
#pragma once

#include <string>
#include <vector>

namespace distlm::tools {

// Lines longer than this (no '\n' within it) are printed in pieces of this size.
inline constexpr size_t kMaxLineBytes = 64 * 1024;

// Launch() returns this when timeout_s passed before the ranks finished.
inline constexpr int kTimeoutExitCode = 124;

// The line Launch() writes on err_fd when rank `rank`, which has a joiner, ends; `end` says how
// ("was killed by signal 9 (SIGKILL)", "exited with code 3"). Unlike the ranks' own lines it has
// no "[rank R]" prefix, so a caller can tell it from anything a rank prints.
inline std::string JoinerTakesPlaceLine(int rank, const std::string& end) {
  return "launch: rank " + std::to_string(rank) + " " + end + "; its joiner takes its place (--join_ranks)";
}

struct LaunchOptions {
  int nproc_per_node = 1;                   // ranks to start, >= 1 (--nproc_per_node)
  std::string master_addr = "127.0.0.1";    // MASTER_ADDR (--master_addr)
  int master_port = 0;                      // MASTER_PORT; 0 = pick a free one (--master_port)
  double timeout_s = 0;                     // > 0: stop everything after this long (--timeout_s)
  double grace_s = 5;                       // SIGTERM -> SIGKILL delay in a teardown (--grace_s)
  std::string tee_dir;                      // non-empty: also write tee_dir/rank_R.log (--tee)
  std::vector<std::string> command;         // what each rank runs: argv, command[0] the binary
  std::vector<int> join_ranks;              // ranks that get a joiner (--join_ranks; see above)
  // Where the ranks run and where relative paths (command[0] when it holds a '/', tee_dir)
  // are resolved; empty = the launcher's own directory. launch_main passes Bazel's
  // BUILD_WORKING_DIRECTORY, so `bazel run` behaves as if run from the user's shell.
  std::string working_dir;
  int out_fd = 1;                           // ranks' stdout lines go here
  int err_fd = 2;                           // ranks' stderr lines and the launcher's messages
  bool forward_signals = true;              // catch SIGINT/SIGTERM/SIGHUP and forward them
  // For a caller that confines its ranks (the grader's graded_launch): called in each rank's
  // child after fork(), in place of execve(path, argv, envp), so that it can install a filter
  // that allows exactly that exec. Async-signal-safe calls only; returns only on failure, with
  // errno set. Null: execve.
  int (*exec_rank)(const char* path, char* const argv[], char* const envp[], const void* arg) = nullptr;
  const void* exec_rank_arg = nullptr;
  // Called once, in the launcher, when every rank has started (before any output is relayed).
  void (*after_start)(const void* arg) = nullptr;
  const void* after_start_arg = nullptr;
};

// Throws UserError naming the flag when an option is out of range.
void ValidateOptions(const LaunchOptions& options);

// The file execve() should run for command0: a name without '/' is looked up on PATH (as a
// shell does); a relative path is taken from working_dir when that is non-empty. Throws
// UserError when there is no such executable file.
std::string ResolveExecutable(const std::string& command0, const std::string& working_dir);

// A TCP port that was free on addr (an IPv4/IPv6 address or host name of this machine) a moment
// ago. Throws UserError naming --master_addr when nothing can be bound there.
int PickFreePort(const std::string& addr);

// Runs the ranks to the end (see the top of this file) and returns the exit code.
int Launch(const LaunchOptions& options);

}  // namespace distlm::tools
