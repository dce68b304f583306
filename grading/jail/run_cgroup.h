// The kernel's account of one run as a whole: a control group of its own, made by the grader
// below its own before the run starts and joined by the run's first process before exec, so that
// every process and thread the run ever has is in it (a child is born in its parent's group, and
// only root may move a process out: the student's user cannot). The grader reads it from
// outside: the CPU time of everything that ever ran in it (cgroup v1's cpuacct.usage, v2's
// cpu.stat), which no process state hides (a zombie's, an exited child's, a thread's), and the
// memory in use, sampled: anonymous memory and shared memory (tmpfs, /dev/shm, memfd), not the
// page cache, which is charged to whichever run read a file first (LibTorch's libraries, the
// data) and would make the first run of a grading look larger than the next.
//
// What it misses, and the per-process watch (process_watch.h) counts: memory mapped from a
// regular file on disk (page cache), and growth between two samples (20 ms apart).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distlm::grading {

class RunCgroup {
 public:
  // Makes the run's groups (memory and CPU accounting); when that cannot be done (not root, no
  // cgroup file system, a v2 tree without the memory controller) made() is false and why_not()
  // says why.
  RunCgroup();
  ~RunCgroup();  // removes the groups (the run's processes must have ended)
  RunCgroup(const RunCgroup&) = delete;
  RunCgroup& operator=(const RunCgroup&) = delete;

  bool made() const { return made_; }
  const std::string& why_not() const { return why_not_; }

  // In the forked child, before it drops privileges and execs: moves the calling process into the
  // groups. 0, or an errno. System calls only (between fork and exec).
  int Join() const;

  // One sample of the memory in use; cheap enough for every 20 ms.
  void Sample();
  // The largest memory in use sampled, in bytes (-1: none read).
  int64_t memory_peak_bytes() const { return memory_peak_; }
  // The CPU time of everything that ran in the groups, in seconds (-1: cannot be read). Read it
  // after the run's processes ended.
  double CpuSeconds() const;

 private:
  bool made_ = false;
  bool v2_ = false;
  std::string why_not_;
  std::vector<std::string> dirs_;   // the groups made, one per hierarchy
  std::vector<std::string> procs_;  // their cgroup.procs
  std::string memory_stat_;         // memory.stat of the memory group
  std::string cpu_file_;            // cpuacct.usage (v1) or cpu.stat (v2)
  int64_t memory_peak_ = -1;
};

}  // namespace distlm::grading
