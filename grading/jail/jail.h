// Where student code runs (its build and its runs): as an unprivileged user of its own, under
// limits on processes, CPU time, file size and disk use, and, where the kernel lets the grader
// (root with CAP_SYS_ADMIN), in mount, IPC and network namespaces of its own in which the
// grader's files are covered, /tmp is private and only loopback is up.
//
// The full jail's root is an allow-list, not the machine with paths covered: a fresh tmpfs holding
// only the system (/usr and its links, /etc, /sys, a /dev of a few nodes), the jail's own /proc
// and /tmp, and the folders the spec binds (the student's, the shared one, the disk cache, the
// LibTorch it builds against); pivot_root makes it / and the machine's tree is detached. Nothing
// the student's code, its compiler or its assembler opens can name a file outside it.
//
// Two levels, because containers differ: Docker's default profile lets root switch users but
// not make namespaces. kFull is what the grader asks for; kUser (file permissions keep the
// grader's files unreadable, but /tmp is shared and the network is the container's) only when
// the instructor says so (--sandbox=user). Below that the grader refuses to grade, unless told
// --unsafe_no_sandbox (a student grading their own code).
//
// grading/README.md, "Sandbox", lists what each level stops and the hostile submissions that
// check it (grading/hostile_submission_test.cc).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace distlm::grading {

enum class Isolation { kNone, kUser, kFull };

std::string IsolationName(Isolation level);  // "none", "user", "full"

// The user student code runs as: `distlm-student` where it exists (setup.sh and the image make
// it), otherwise uid and gid 61874, which must then belong to nobody.
struct JailUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;  // for messages
};

struct JailSpec {
  Isolation level = Isolation::kNone;
  JailUser user;
  // Covered where the student looks (kFull): an empty root-owned tmpfs over a directory,
  // /dev/null over a file. Missing paths are skipped. Only what lies inside the jail's root needs
  // it (a path under /usr or /etc, or inside a bound folder); the rest is not there at all.
  std::vector<std::string> hidden;
  // The folders the jail's root shows besides the system (kFull), at `target` (made if needed),
  // in this order: the student's work folder, the shared folder and the disk cache read-only,
  // the LibTorch it builds against read-only.
  struct Bind {
    std::string source;
    std::string target;
    bool read_only = false;
  };
  std::vector<Bind> binds;
  // A fresh tmpfs each (kFull), small: it is memory, outside every per-process limit, so the
  // three together (192 MiB) are part of the run's memory budget. TMPDIR points at the student's
  // folder on disk, inside the disk budget.
  std::vector<std::string> private_tmp = {"/tmp", "/var/tmp", "/dev/shm"};
  int64_t tmp_bytes = int64_t{64} << 20;  // size of each
  // kFull: a PID namespace of its own where the kernel allows it (its /proc shows only its own
  // processes: no other command line, the grader's included, is visible).
  bool pid_namespace = true;
  int64_t max_processes = 0;  // RLIMIT_NPROC of the student's user (threads count); 0: none
  double cpu_seconds = 0;     // RLIMIT_CPU of each process; 0: none
  // The run is stopped when the free space of the file system holding `disk_watch_path` falls
  // by more than this while it runs; 0: not watched.
  int64_t disk_bytes = 0;
  int64_t disk_inodes = 0;  // the same for files made (a million empty files fill no blocks); 0: not watched
  std::string disk_watch_path;
  std::map<std::string, std::string> env;  // set for the student (HOME, USER, TMPDIR, ...)
};

// Everything the child needs, made in the parent: between fork and exec only system calls are
// safe, so Enter() allocates nothing.
class PreparedJail {
 public:
  explicit PreparedJail(const JailSpec& spec);
  ~PreparedJail();
  PreparedJail(const PreparedJail&) = delete;
  PreparedJail& operator=(const PreparedJail&) = delete;

  const JailSpec& spec() const { return spec_; }

  // In the forked child, before exec, in this order (each returns 0, or an errno with *what
  // naming the step that failed, a static string):
  //  1. EnterNamespaces: mount, IPC and network namespaces (kFull), the coverings, the jail's
  //     root (the allow-list) made / by pivot_root, and a PID namespace when
  //     spec().pid_namespace and the kernel allows it (*new_pid_namespace says whether): then
  //     the caller's next child is its first process;
  //  2. MountProc, in that first process: a /proc of the new PID namespace;
  //  3. DropToStudent: limits, then the student's user and groups, no_new_privs.
  int EnterNamespaces(const char** what, bool* new_pid_namespace) const;
  int MountProc(const char** what) const;
  int DropToStudent(const char** what) const;

  // The first folder on the way down to `path` (absolute; `path` itself excluded) that the
  // student's user cannot pass through in this jail, "" when there is none; *why then says
  // its mode and owner. In a full jail the way down to every bound folder is the jail root's
  // own (0755), so there is none.
  std::string BlockingAncestor(const std::string& path, std::string* why) const;

 private:
  struct Cover {
    std::string path;
    bool is_dir = true;
  };
  static constexpr size_t kMaxBinds = 8;
  // One entry of the jail's root (jail_root.cc); paths are the root's, under root_.
  struct RootEntry {
    enum Kind { kDir, kLink, kFile } kind = kDir;
    std::string source;  // the machine's path (kDir, kFile); the link's target (kLink)
    std::string target;  // root_ + the path inside the jail
  };
  // Makes the jail's root under root_ and pivots into it (in EnterNamespaces, after the
  // coverings; `fd_paths` name the binds' sources, opened before anything was covered).
  int EnterRoot(const char* const* fd_paths, bool proc_of_machine, const char** what) const;
  void PlanRoot();
  struct BoundFd {
    std::string source;
    std::string target;
    std::vector<std::string> target_prefixes;  // each ancestor of target, outermost first
    bool read_only = false;
  };
  JailSpec spec_;
  std::vector<Cover> covers_;
  std::vector<BoundFd> binds_;
  std::string tmp_options_;
  std::string root_;                     // where the jail's root is built (a private tmpfs)
  std::vector<RootEntry> system_;        // the system's folders, links and device nodes
  std::vector<std::string> root_dirs_;   // folders made in the root, outermost first
  std::vector<std::string> tmp_targets_; // private_tmp, as paths under root_
};

// The student user of this machine, or an error saying why there is none.
bool FindJailUser(JailUser* user, std::string* error);

// Brings loopback up in a fresh network namespace, where it starts down; 0 or an errno. Only
// system calls: for use between fork and exec.
int LoopbackUp();

// How many processes of `uid` are alive (zombies not counted), from /proc.
int LiveProcessesOf(uid_t uid);

// SIGKILLs every process of `uid` (what a submission left behind, however it detached), and
// reaps those that were re-parented to this process.
void KillAllProcessesOf(uid_t uid);

}  // namespace distlm::grading
