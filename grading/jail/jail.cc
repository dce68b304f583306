#include "grading/jail/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStudentUser = "distlm-student";
constexpr uid_t kFallbackId = 61874;

// "/proc/self/fd/N" into out (32 bytes), without allocating.
void FdPath(int fd, char* out) {
  const char prefix[] = "/proc/self/fd/";
  memcpy(out, prefix, sizeof(prefix) - 1);
  char digits[12];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + fd % 10);
    fd /= 10;
  } while (fd > 0 && n < 11);
  char* p = out + sizeof(prefix) - 1;
  while (n > 0) *p++ = digits[--n];
  *p = '\0';
}

int SetLimit(int resource, rlim_t soft, rlim_t hard) {
  rlimit l{soft, hard};
  return setrlimit(resource, &l) == 0 ? 0 : errno;
}

}  // namespace

// Brings loopback up in a fresh network namespace, where it starts down. System calls only.
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

std::string IsolationName(Isolation level) {
  switch (level) {
    case Isolation::kNone: return "none";
    case Isolation::kUser: return "user";
    case Isolation::kFull: return "full";
  }
  return "?";
}

PreparedJail::PreparedJail(const JailSpec& spec) : spec_(spec) {
  if (spec_.level != Isolation::kFull) return;
  for (const auto& h : spec_.hidden) {
    std::error_code ec;
    const fs::path p = fs::canonical(h, ec);
    if (ec) continue;
    // The system itself stays (a results file in / must not cover /usr).
    static const char* const kSystem[] = {"/", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/dev", "/proc", "/sys", "/var"};
    bool system = false;
    for (const char* d : kSystem) system = system || p == d;
    if (system) continue;
    covers_.push_back({p.string(), fs::is_directory(p, ec)});
  }
  for (const auto& b : spec_.binds) {
    BoundFd bound;
    if (!fs::is_directory(b.source)) continue;  // a missing cache is not an error
    bound.source = b.source;
    bound.target = b.target;
    bound.read_only = b.read_only;
    binds_.push_back(std::move(bound));
  }
  std::vector<std::string> tmp;
  for (const auto& t : spec_.private_tmp) {
    if (fs::is_directory(t)) tmp.push_back(t);
  }
  spec_.private_tmp = tmp;
  tmp_options_ = "size=" + std::to_string(spec_.tmp_bytes) + ",mode=1777";
  PlanRoot();
}

PreparedJail::~PreparedJail() = default;

int PreparedJail::EnterNamespaces(const char** what, bool* new_pid_namespace) const {
  auto fail = [what](const char* step) {
    *what = step;
    return errno != 0 ? errno : EPERM;
  };
  *new_pid_namespace = false;
  if (spec_.level == Isolation::kNone) return 0;
  if (spec_.level == Isolation::kFull) {
    const int ns = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET;
    if (spec_.pid_namespace && unshare(ns | CLONE_NEWPID) == 0) {
      *new_pid_namespace = true;
    } else if (unshare(ns) != 0) {
      return fail("unshare(mount, IPC and network namespaces)");
    }
    if (int err = LoopbackUp(); err != 0) {
      errno = err;
      return fail("bringing loopback up in the new network namespace");
    }
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      // EINVAL: / is not a mount point (a chroot into a plain folder; a container's / is one).
      return fail(errno == EINVAL ? "making / private (/ is not a mount point: in a chroot, bind-mount the root onto itself first)"
                                  : "making / private");
    }
    // Hold on to what the jail's root shows before anything is covered: a bind's source must be
    // a mount of this namespace, so these are opened after unshare; /proc/self/fd/N names them.
    int fds[kMaxBinds];
    char fd_paths[kMaxBinds][32];
    const char* fd_names[kMaxBinds];
    if (binds_.size() > kMaxBinds) {
      errno = E2BIG;
      return fail("too many binds");
    }
    for (size_t i = 0; i < binds_.size(); ++i) {
      fds[i] = open(binds_[i].source.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (fds[i] < 0) return fail("opening a folder to show in the jail");
      FdPath(fds[i], fd_paths[i]);
      fd_names[i] = fd_paths[i];
    }
    // Covered first, so that a hidden path inside what the root shows stays hidden there.
    for (const auto& c : covers_) {
      const int r = c.is_dir ? mount("tmpfs", c.path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1m,mode=0755")
                             : mount("/dev/null", c.path.c_str(), nullptr, MS_BIND, nullptr);
      // ENOENT: something above it was covered already (the grader's home).
      if (r != 0 && errno != ENOENT) return fail("covering a grader path");
    }
    if (int err = EnterRoot(fd_names, !*new_pid_namespace, what); err != 0) return err;
    for (size_t i = 0; i < binds_.size(); ++i) close(fds[i]);
  }
  return 0;
}

int PreparedJail::MountProc(const char** what) const {
  // The first process of the new PID namespace mounts a proc of its own on the jail root's
  // /proc: ps, /proc/N and /proc/N/cmdline show the jail's processes,
  // and with hidepid only the student's own (the namespace's first process is a copy of the
  // grader, command line included, and stays root's). "invisible" is Linux 5.8's name for 2.
  const unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  if (mount("proc", "/proc", "proc", flags, "hidepid=invisible") != 0 &&
      mount("proc", "/proc", "proc", flags, "hidepid=2") != 0 && mount("proc", "/proc", "proc", flags, nullptr) != 0) {
    *what = "mounting the PID namespace's /proc";
    return errno != 0 ? errno : EPERM;
  }
  return 0;
}

int PreparedJail::DropToStudent(const char** what) const {
  auto fail = [what](const char* step) {
    *what = step;
    return errno != 0 ? errno : EPERM;
  };
  if (spec_.level == Isolation::kNone) return 0;
  errno = 0;
  if (spec_.max_processes > 0) {
    const rlim_t n = static_cast<rlim_t>(spec_.max_processes);
    if (int err = SetLimit(RLIMIT_NPROC, n, n); err != 0) return fail("setting RLIMIT_NPROC");
  }
  if (spec_.cpu_seconds > 0) {
    // SIGXCPU at the soft limit, SIGKILL at the hard one.
    const rlim_t s = static_cast<rlim_t>(spec_.cpu_seconds);
    if (int err = SetLimit(RLIMIT_CPU, s, s + 5); err != 0) return fail("setting RLIMIT_CPU");
  }
  if (setgroups(0, nullptr) != 0) return fail("dropping supplementary groups");
  if (setresgid(spec_.user.gid, spec_.user.gid, spec_.user.gid) != 0) return fail("switching to the student's group");
  if (setresuid(spec_.user.uid, spec_.user.uid, spec_.user.uid) != 0) return fail("switching to the student's user");
  // No set-uid program (sudo, su, ...) gives the privileges back.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail("setting no_new_privs");
  return 0;
}

std::string PreparedJail::BlockingAncestor(const std::string& path, std::string* why) const {
  // In a full jail the way down to a bound folder is made by EnterRoot, root's and 0755.
  if (spec_.level != Isolation::kUser) return "";
  const fs::path target = fs::weakly_canonical(path);
  fs::path way;
  for (auto part = target.begin(); part != target.end(); ++part) {
    way /= *part;
    if (std::next(part) == target.end()) break;  // the folder itself is the student's
    struct stat st;
    if (stat(way.c_str(), &st) != 0) {
      *why = std::string("cannot stat it: ") + strerror(errno);
      return way.string();
    }
    const mode_t bit = st.st_uid == spec_.user.uid ? S_IXUSR : st.st_gid == spec_.user.gid ? S_IXGRP : S_IXOTH;
    if ((st.st_mode & bit) == 0) {
      char mode[8];
      snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
      const passwd* owner = getpwuid(st.st_uid);
      *why = std::string("mode ") + mode + ", owner " + (owner != nullptr ? owner->pw_name : std::to_string(st.st_uid));
      return way.string();
    }
  }
  return "";
}

bool FindJailUser(JailUser* user, std::string* error) {
  if (const passwd* pw = getpwnam(kStudentUser); pw != nullptr) {
    if (pw->pw_uid == 0 || pw->pw_gid == 0) {
      *error = std::string("the user ") + kStudentUser + " has uid or gid 0; it must be an unprivileged user";
      return false;
    }
    *user = {pw->pw_uid, pw->pw_gid, kStudentUser};
    return true;
  }
  if (const passwd* pw = getpwuid(kFallbackId); pw != nullptr) {
    *error = std::string("there is no user ") + kStudentUser + ", and uid " + std::to_string(kFallbackId) +
             " (the fallback) belongs to " + pw->pw_name + "; make one with `useradd --system " + kStudentUser + "`";
    return false;
  }
  *user = {kFallbackId, static_cast<gid_t>(kFallbackId), "uid " + std::to_string(kFallbackId)};
  return true;
}

int LiveProcessesOf(uid_t uid) {
  int n = 0;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(it->path() / "status");
    std::string line, state;
    bool mine = false;
    while (std::getline(in, line)) {
      if (line.rfind("State:", 0) == 0) state = line;
      if (line.rfind("Uid:", 0) == 0) {
        unsigned long real = 0;
        mine = sscanf(line.c_str(), "Uid: %lu", &real) == 1 && real == uid;
      }
    }
    if (mine && state.find('Z') == std::string::npos) ++n;
  }
  return n;
}

void KillAllProcessesOf(uid_t uid) {
  if (uid == 0 || geteuid() != 0) return;
  for (int round = 0; round < 100; ++round) {
    pid_t pid = fork();
    if (pid == 0) {
      // As that user, kill(-1) reaches exactly its processes (and not this one).
      if (setresuid(uid, uid, uid) != 0) _exit(1);
      for (int i = 0; i < 3; ++i) {
        if (kill(-1, SIGKILL) != 0) break;
        usleep(2000);
      }
      _exit(0);
    }
    if (pid > 0) {
      while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    // Orphans re-parented to this process (it is PID 1 in a container, or a subreaper).
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (LiveProcessesOf(uid) == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace distlm::grading
