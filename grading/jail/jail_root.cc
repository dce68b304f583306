// The full jail's root: an allow-list. A fresh tmpfs gets the system's folders (read-only), its
// links as they are (/bin -> usr/bin), a /dev of the nodes a program needs, a /proc, private
// tmpfs for /tmp, /var/tmp and /dev/shm, and the spec's binds; pivot_root then makes it / and the
// machine's tree is detached. Whatever is not named here does not exist for student code: the
// grader's checkout, another clone, /opt, /srv, /home, /autograder.
#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>

#include "grading/jail/jail.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

// The system, shown read-only: programs, libraries, configuration (/etc holds nothing of the
// grader's: passwd's hashes are in shadow, root's alone), and /sys (the CPU count, cgroup limits).
constexpr const char* kSystem[] = {"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys"};
// The device nodes a program may need; the rest of /dev (disks, the console, kmsg) is not there.
constexpr const char* kDevices[] = {"null", "zero", "full", "random", "urandom", "tty"};

// Each ancestor of `path` (absolute) and the path itself, outermost first.
void AddWayTo(const std::string& path, std::vector<std::string>* dirs) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string d = path.substr(0, slash);
    bool known = false;
    for (const auto& e : *dirs) known = known || e == d;
    if (!known) dirs->push_back(d);
    if (slash == std::string::npos) break;
  }
}

int MountBind(const char* source, const char* target, bool read_only) {
  if (mount(source, target, nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno;
  if (read_only && mount(nullptr, target, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
    return errno;
  }
  return 0;
}

}  // namespace

void PreparedJail::PlanRoot() {
  for (const char* candidate : {"/tmp", "/mnt"}) {
    std::error_code ec;
    if (fs::is_directory(candidate, ec)) {
      root_ = candidate;
      break;
    }
  }
  if (root_.empty()) return;  // EnterRoot says so
  for (const char* p : kSystem) {
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(p, ec);
    if (ec || !fs::exists(st)) continue;
    if (fs::is_symlink(st)) {
      system_.push_back({RootEntry::kLink, fs::read_symlink(p, ec).string(), root_ + p});
    } else if (fs::is_directory(st)) {
      system_.push_back({RootEntry::kDir, p, root_ + p});
    }
  }
  for (const char* d : {"/dev", "/proc"}) AddWayTo(root_ + d, &root_dirs_);
  for (const char* n : kDevices) {
    const std::string node = std::string("/dev/") + n;
    std::error_code ec;
    if (fs::is_character_file(node, ec)) system_.push_back({RootEntry::kFile, node, root_ + node});
  }
  for (const auto& [name, to] : {std::pair{"fd", "/proc/self/fd"}, std::pair{"stdin", "/proc/self/fd/0"},
                                 std::pair{"stdout", "/proc/self/fd/1"}, std::pair{"stderr", "/proc/self/fd/2"}}) {
    system_.push_back({RootEntry::kLink, to, root_ + "/dev/" + name});
  }
  for (const auto& t : spec_.private_tmp) {
    tmp_targets_.push_back(root_ + t);
    AddWayTo(root_ + t, &root_dirs_);
  }
  for (auto& b : binds_) {
    b.target = root_ + b.target;
    b.target_prefixes.clear();
    AddWayTo(b.target, &b.target_prefixes);
  }
}

int PreparedJail::EnterRoot(const char* const* fd_paths, bool proc_of_machine, const char** what) const {
  auto fail = [what](const char* step, int err) {
    *what = step;
    return err != 0 ? err : EPERM;
  };
  if (root_.empty()) return fail("finding a folder to build the jail's root on (/tmp or /mnt)", ENOENT);
  if (mount("tmpfs", root_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") != 0) {
    return fail("mounting the jail's root", errno);
  }
  for (const auto& d : root_dirs_) mkdir(d.c_str(), 0755);
  for (const auto& e : system_) {
    int err = 0;
    switch (e.kind) {
      case RootEntry::kLink:
        err = symlink(e.source.c_str(), e.target.c_str()) == 0 ? 0 : errno;
        break;
      case RootEntry::kDir:
        mkdir(e.target.c_str(), 0755);
        err = MountBind(e.source.c_str(), e.target.c_str(), true);
        break;
      case RootEntry::kFile: {
        const int fd = open(e.target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) close(fd);
        err = mount(e.source.c_str(), e.target.c_str(), nullptr, MS_BIND, nullptr) == 0 ? 0 : errno;
        break;
      }
    }
    if (err != 0) return fail("showing the system in the jail's root (/usr, /etc, /dev's nodes)", err);
  }
  // Without a PID namespace of its own the jail sees the machine's processes (MountProc mounts
  // the namespace's /proc otherwise, in its first process).
  if (proc_of_machine) {
    if (int err = MountBind("/proc", (root_ + "/proc").c_str(), false); err != 0) {
      return fail("showing /proc in the jail's root", err);
    }
  }
  for (const auto& t : tmp_targets_) {
    if (mount("tmpfs", t.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, tmp_options_.c_str()) != 0) {
      return fail("mounting a private tmpfs", errno);
    }
  }
  for (size_t i = 0; i < binds_.size(); ++i) {
    for (const auto& prefix : binds_[i].target_prefixes) mkdir(prefix.c_str(), 0755);
    if (int err = MountBind(fd_paths[i], binds_[i].target.c_str(), binds_[i].read_only); err != 0) {
      return fail("binding a folder into the jail's root (the student's, the shared one, the disk cache, LibTorch)",
                  err);
    }
  }
  // pivot_root(".", "."): the machine's root is stacked on the new one and detached at once.
  if (chdir(root_.c_str()) != 0) return fail("entering the jail's root", errno);
  if (syscall(SYS_pivot_root, ".", ".") != 0) return fail("pivot_root into the jail's root", errno);
  if (umount2(".", MNT_DETACH) != 0) return fail("detaching the machine's root", errno);
  if (chdir("/") != 0) return fail("entering the jail's root", errno);
  return 0;
}

}  // namespace distlm::grading
