// Running a program the grader does not trust: its own process group, a deadline, an
// address-space limit inherited by everything it starts, no core dumps, optionally a private
// network namespace in which only loopback is up, and for student code a jail (grading/jail/jail.h:
// its own user, namespaces, limits on processes and disk). Output (stdout and stderr together)
// is kept, up to a bound, for the messages.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "grading/jail/jail.h"
#include "tools/no_spawn.h"

namespace distlm::grading {

struct SandboxLimits {
  double timeout_s = 120;          // then SIGKILL to the process group
  int64_t address_space_bytes = 0;  // RLIMIT_AS of every process started; 0 = no limit
  int64_t file_size_bytes = 0;     // RLIMIT_FSIZE (largest file it may write); 0 = no limit
  bool isolate_network = false;    // new network namespace, loopback up; needs root
  // > 0: in that namespace (or a full jail's), loopback carries at most this many bytes a second
  // (loopback_shaping.h); the run's result says whether it did (SandboxResult::loopback_rate).
  uint64_t loopback_rate_bytes_per_s = 0;
  size_t max_output_bytes = 256 * 1024;  // kept: the first quarter and the last three quarters
  // Student code: entered after the limits above, before exec; every process of the jail's user
  // is killed when the command ends. Not owned; null: runs as the grader.
  const PreparedJail* jail = nullptr;
  // Non-null: the command is executed through this filter (tools/no_spawn.h), so that it can
  // start no process and execute nothing else. Not owned.
  const tools::NoSpawnFilter* no_spawn = nullptr;
};

struct SandboxCommand {
  std::vector<std::string> argv;              // argv[0] is a path
  std::map<std::string, std::string> env;     // set in (or added to) the grader's environment
  std::vector<std::string> unset_env;         // removed from it
  std::string working_dir;                    // empty: the grader's
  std::string stdout_path;                    // non-empty: stdout goes to this new file instead
};

struct SandboxResult {
  int exit_code = -1;          // exit status, or 128 + signal number
  int signal = 0;              // the signal that ended it, 0 if it exited
  bool timed_out = false;      // killed at the deadline
  bool network_isolated = false;
  std::string isolation_note;  // why the network could not be isolated, when asked and it failed
  bool disk_limit_hit = false;  // stopped for writing more than the jail's disk_bytes (or disk_inodes)
  bool inode_limit_hit = false;  // ... and it was the files' count
  std::string jail_error;       // "<step> failed: <error>" when the jail could not be entered
  std::string output;          // stdout and stderr interleaved, possibly cut in the middle
  double seconds = 0;          // wall time
  // Bytes sent over loopback in the command's own network namespace, counted by the kernel and
  // read by the grader once the command ended (so nothing the command did can change the
  // count but sending more); -1 when it had no namespace of its own.
  int64_t loopback_bytes = -1;
  // The rate loopback was limited to (SandboxLimits::loopback_rate_bytes_per_s) once the namespace
  // was made, before the command started; 0 when it was not (not asked, or it failed: see
  // isolation_note).
  uint64_t loopback_rate = 0;
  // The most memory of its own any one of its processes held (their kernel high-water marks less
  // the files they mapped, sampled by the grader while it ran: grading/jail/process_watch.h), in
  // bytes; -1 when none was read.
  int64_t peak_memory_bytes = -1;
  // The most CPU time any one of its processes used (all its threads, user and system), sampled
  // the same way, in seconds; -1 when none was read.
  double peak_cpu_seconds = -1;
  // The run as a whole, from its control group (grading/jail/run_cgroup.h: every process and
  // thread it ever had): the most anonymous and shared memory in use at once, sampled, in bytes,
  // and the CPU time of all of it, in seconds; -1 when the run had no group (accounting_note says
  // why).
  int64_t run_memory_bytes = -1;
  double run_cpu_seconds = -1;
  std::string accounting_note;
};

// Runs the command to its end or to the deadline. Throws std::runtime_error only when the
// grader itself cannot work (fork or a temporary file fails); a command that cannot be
// executed gives exit code 127 and says so in its output.
SandboxResult RunSandboxed(const SandboxCommand& command, const SandboxLimits& limits);

// What this machine allows student code: the jail's user (when there is one) and the best
// level, with why the better levels fail (each tried for real: a jailed /bin/true).
struct IsolationProbe {
  JailUser user;
  Isolation best = Isolation::kNone;
  std::string why_not_full;
  std::string why_not_user;
};
IsolationProbe ProbeIsolation();

// Which directory a path named when the grader made it (device and inode), so that a later
// check can tell the grader's folder from one a student put in its place.
struct DirIdentity {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool known() const { return ino != 0; }
};
// The identity of `path` if it is a real directory (not a symbolic link to one); unknown otherwise.
DirIdentity IdentityOf(const std::string& path);

// Reads a file that untrusted code wrote, once that code has ended. `trusted_root` must be a real
// directory (no symbolic link), the one the grader made when `root` is known; `path` lies inside
// it and is walked from it one name at a time without following any symbolic link (a link
// anywhere on the way is refused, wherever it points). Only a regular file is read (not a
// FIFO, a socket or a device), owned by `owner` when owner >= 0 (so a hard link cannot lend it
// the grader's files), and at most max_bytes of it (*truncated says whether there was more).
// False, with *why naming the file as the student knows it, otherwise.
bool ReadUntrustedFile(const std::string& trusted_root, const std::string& path, int64_t owner, size_t max_bytes,
                       std::string* out, bool* truncated, std::string* why, DirIdentity root = {});

// A fresh directory named prefix + random suffix, in `parent` (created if needed) or, when that
// is empty, in $TEST_TMPDIR, $TMPDIR or /tmp.
std::string MakeTempDir(const std::string& prefix, const std::string& parent = "");

// Removes a directory tree (no symlink is followed); quiet when it is absent.
void RemoveTree(const std::string& path);

// The name of a signal ("SIGSEGV"), or "signal N".
std::string SignalName(int signal);

}  // namespace distlm::grading
