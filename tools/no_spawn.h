// No replay: a graded run may not start processes or execute programs beyond what the grader's
// launcher started, nor leave kernel objects behind for a later run. Without this, a run could
// re-execute its own binary on one process with the whole batch (the very computation behind the
// grader's expected trace) and log its numbers.
//
// The mechanism is a seccomp filter (Debian's libseccomp builds it), installed in each rank
// between fork() and execve() and inherited by everything the rank does afterwards:
//   - fork, vfork, and clone without CLONE_THREAD fail with EPERM (threads are still allowed:
//     LibTorch, OpenMP and Gloo need them); clone3, whose flags a filter cannot read, fails with
//     ENOSYS, and glibc then makes its threads with clone;
//   - execveat fails with EPERM, and so does every execve but one: the filter compares the path
//     pointer with an address drawn at random for this filter, where the launcher's child copies
//     the rank's path just before its own execve. The new program has a fresh address space and
//     no way to learn the address (the filter cannot be read back without CAP_SYS_ADMIN, the
//     launcher is not dumpable), and guessing it is one system call per try among ~2^44;
//   - ptrace and process_vm_readv/writev fail with EPERM (no reaching into another process);
//   - add_key, request_key, keyctl and mq_open fail with EPERM: a key in the user's keyring or a
//     POSIX message queue outlives the run's processes and could hand bytes to the next run;
//   - a system call of another architecture (int 0x80 on x86-64) kills the process.
// Why seccomp and not another kernel mechanism: it needs no privilege beyond no_new_privs (so it
// works as the unprivileged student user, inside or outside the namespaces), it binds every
// descendant, and it cannot be lifted. RLIMIT_NPROC cannot tell a rank's own threads from a
// new process, and Landlock can restrict which files execute but not how often (the rank's own
// binary must stay executable).
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <string>
#include <vector>

namespace distlm::tools {

class NoSpawnFilter {
 public:
  // A filter that allows exactly one execve, made through ExecConfined. Throws
  // std::runtime_error when libseccomp cannot build it.
  static NoSpawnFilter ExecOnce();
  // A filter that allows no execve at all (for the launcher itself once its ranks run).
  static NoSpawnFilter NoExec();

  // In a forked child, in place of execve (async-signal-safe: mmap, memcpy, prctl, execve):
  // maps the filter's page, copies `path` there, sets no_new_privs, installs the filter and
  // executes path. Returns only on failure, with errno set.
  int ExecConfined(const char* path, char* const argv[], char* const envp[]) const;
  // Installs the filter in the calling process (every thread of it). 0 or an errno.
  int Install() const;

  // The launcher hook's shape (tools/launcher.h): arg is a const NoSpawnFilter*.
  static int ExecHook(const char* path, char* const argv[], char* const envp[], const void* arg);

 private:
  std::vector<sock_filter> program_;
  uintptr_t exec_page_ = 0;    // where ExecConfined maps its page (0: NoExec)
  uintptr_t exec_path_ = 0;    // the one pointer execve accepts, inside that page
};

}  // namespace distlm::tools
