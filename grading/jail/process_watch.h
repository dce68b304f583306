// Evidence from outside the student's processes, as the byte count on the network is: the most
// memory of its own any one process of a command held, and the most CPU time any one of them
// used, read by the grader from the kernel while the command runs. Each process's VmHWM
// (/proc/PID/status) is the high-water mark of its resident set since its last exec, and its
// utime + stime (/proc/PID/stat) the CPU time of all its threads; the kernel keeps both, and a
// process can raise them, never lower them.
//
// Its own memory is the mark less the mapped files it has resident (RssFile): LibTorch's
// libraries are hundreds of MB of the mark (the CUDA wheel's most of it), and how many of their
// pages a process has mapped depends on what the page cache already held, not on what it
// computed: two runs of the same 1F1B came out 40 MB apart with them in. The files mapped grow
// as code is first run and then stay, while a rank's peak comes back every update, so the mark
// less the latest count is the peak of the rest, to within what it mapped after that peak. The watch follows the command's process tree and, for a jailed
// command, every process of the student's user (one that left the tree, through a double fork or
// setsid, is still counted).
//
// A process whose first thread ended while others run (pthread_exit in main, or a
// __libc_start_main of the student's that runs main on a thread) is read through its threads
// (/proc/PID/task/TID): it is counted as long as any of them lives.
//
// What it misses: growth in the last sampling interval of a process's life (the samples are
// 20 ms apart), and a process that lives less than one. A rank's peak comes while it trains,
// seconds before it ends. The kernel updates the mark lazily: memory that glibc hands back with
// madvise (a thread's arena) can leave a peak unrecorded, so the grader's runs fix malloc's mmap
// threshold (Autograder::RunOptions), which makes every large block a mapping that is unmapped
// when freed, and the mark exact.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>

namespace distlm::grading {

class ProcessWatch {
 public:
  // `root`: the command's first process. `uid` >= 0: also every process of that user.
  ProcessWatch(pid_t root, int64_t uid);

  // One sample: the high-water marks and CPU times of the processes known; every few calls the
  // process list is read again for new ones. Cheap enough to call every 20 ms.
  void Sample();

  // The largest high-water mark seen, less mapped files, in bytes; -1 before any process was read.
  int64_t peak_bytes() const { return peak_bytes_; }
  // The most CPU time (user and system, all threads) any one process had used when last read, in
  // seconds; -1 before any process was read.
  double peak_cpu_seconds() const { return peak_cpu_seconds_; }

 private:
  void Rescan();

  pid_t root_;
  int64_t uid_;
  int calls_ = 0;
  std::set<pid_t> watched_;  // the command's processes found so far and still alive
  int64_t peak_bytes_ = -1;
  double peak_cpu_seconds_ = -1;
};

// The high-water mark of `pid`'s resident set less the files it has mapped, in bytes (VmHWM -
// RssFile; a live thread's, where its first thread has ended), or -1 when it cannot be read (the
// process ended, or has no memory of its own: a kernel thread, a zombie).
int64_t OwnMemoryPeakOf(pid_t pid);
// The CPU time `pid` has used, user and system, all its threads, in seconds (utime + stime of
// /proc/PID/stat), or -1 when it cannot be read.
double CpuSecondsOf(pid_t pid);

}  // namespace distlm::grading
