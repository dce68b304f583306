#include "grading/jail/student_space.h"

#include <fcntl.h>
#include <string.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "grading/jail/sandbox.h"

namespace distlm::grading {
namespace {

// Bytes as whole GiB, rounded ("4").
std::string GiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

namespace fs = std::filesystem;

std::string ThisProgramsFolder() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "" : exe.parent_path().string();
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// The ids of the System V IPC objects of `uid` listed in /proc/sysvipc/`kind` (the id is the
// second column, the owner's uid the `uid_column`th from 0, the creator's two further on: an
// object handed to another owner still serves its creator).
std::vector<int> IpcIdsOf(const char* kind, size_t uid_column, uid_t uid) {
  std::vector<int> ids;
  const std::string mine = std::to_string(uid);
  std::ifstream in(std::string("/proc/sysvipc/") + kind);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string v; fields >> v;) f.push_back(v);
    if (f.size() > uid_column + 2 && (f[uid_column] == mine || f[uid_column + 2] == mine)) {
      ids.push_back(std::atoi(f[1].c_str()));
    }
  }
  return ids;
}

}  // namespace

StudentSpace::StudentSpace(const SpaceLimits& config, const std::string& work)
    : config_(config),
      work_(work),
      grader_dir_(work + "/grader"),
      student_dir_(work + "/student"),
      shared_dir_(work + "/shared") {
  std::error_code ec;
  for (const std::string& d : {grader_dir_, student_dir_, shared_dir_}) {
    if (!ec) fs::create_directories(d, ec);
  }
  if (ec) throw GraderError("cannot make the grading's folders in " + work + ": " + ec.message());
  chmod(grader_dir_.c_str(), 0700);
  chmod(student_dir_.c_str(), 0700);
  chmod(shared_dir_.c_str(), 0755);
  if (config_.isolation != Isolation::kNone) chmod(work_.c_str(), 0711);  // the student walks through
  // The grader's own disk cache: config.disk_cache, or ~/.cache/distlm/bazel-disk, if it exists.
  std::string cache = config_.disk_cache;
  if (cache.empty() && !Env("HOME").empty()) cache = Env("HOME") + "/.cache/distlm/bazel-disk";
  if (fs::is_directory(cache)) grader_cache_ = cache;
  disk_cache_ = grader_cache_;
}

StudentSpace::~StudentSpace() {
  // --sandbox=user shares /tmp, /var/tmp and /dev/shm with the machine: what this grading's
  // student code left there must not reach the next grading (a second submission on the same
  // Gradescope machine, or a planted file for the grader's own use).
  if (level_ == Isolation::kUser) ClearSharedTmp();
}

void StudentSpace::ClearSharedTmp() const {
  // Called when no student process runs (each command ends with KillAllProcessesOf). Entries
  // are removed by name without following links; only the student's user's.
  if (user_.uid == 0) return;
  // At any depth: a world-writable folder inside one of these (/tmp/.X11-unix, a tool's cache
  // left 1777) takes the student's files as well as the top does. Only such folders are
  // entered: nowhere else could the student's user have written, and a grading's work folder
  // under /tmp (root's, not world-writable: this one's or another's running beside it) holds
  // run folders that are the student's while they run.
  // A full jail's /tmp, /var/tmp, /dev/shm and IPC namespace are its own, gone with each
  // command; /run/lock (1777 on Debian) is the machine's at both levels.
  const bool full = level_ == Isolation::kFull;
  const std::vector<const char*> shared =
      full ? std::vector<const char*>{"/run/lock"} : std::vector<const char*>{"/tmp", "/var/tmp", "/dev/shm", "/run/lock"};
  for (const char* dir : shared) {
    std::error_code ec;
    std::vector<fs::path> mine;
    for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end; it != end;
         it.increment(ec)) {
      struct stat st;
      if (lstat(it->path().c_str(), &st) != 0) continue;
      if (st.st_uid == user_.uid) {
        mine.push_back(it->path());
        if (S_ISDIR(st.st_mode)) it.disable_recursion_pending();
      } else if (S_ISDIR(st.st_mode) && (st.st_mode & S_IWOTH) == 0) {
        it.disable_recursion_pending();
      }
    }
    for (const auto& p : mine) {
      std::error_code rm;
      fs::remove_all(p, rm);
    }
  }
  if (full) return;
  // System V objects outlive their processes.
  for (int id : IpcIdsOf("shm", 7, user_.uid)) shmctl(id, IPC_RMID, nullptr);
  for (int id : IpcIdsOf("msg", 7, user_.uid)) msgctl(id, IPC_RMID, nullptr);
  for (int id : IpcIdsOf("sem", 4, user_.uid)) semctl(id, 0, IPC_RMID);
}

JailSpec StudentSpace::BaseSpec() const {
  JailSpec spec;
  spec.level = level_;
  spec.user = user_;
  // What student code must not see: the grader (its binaries and their runfiles, the reference
  // binaries among them), the grader's own runs, the checkout it grades from (reference sources),
  // the grader's home (its caches) and what the caller names (results, the submission as sent).
  spec.hidden = {grader_dir_, ThisProgramsFolder(), Env("RUNFILES_DIR"), Env("TEST_SRCDIR"), config_.source_root};
  const std::string home = Env("HOME");
  if (!home.empty() && home != "/") spec.hidden.push_back(home);
  if (geteuid() == 0) spec.hidden.push_back("/root");
  for (const auto& h : config_.hidden_paths) spec.hidden.push_back(h);
  std::vector<std::string> kept;
  for (const auto& h : spec.hidden) {
    if (!h.empty()) kept.push_back(h);
  }
  spec.hidden = kept;
  spec.binds.push_back({student_dir_, student_dir_, false});
  spec.binds.push_back({shared_dir_, shared_dir_, true});
  // A LibTorch outside /usr (DISTLM_LIBTORCH: the torch wheel's), which the student's build
  // compiles against and its runs load, with the CUDA libraries the wheel lays out beside it.
  if (const std::string torch = Env("DISTLM_LIBTORCH"); !torch.empty()) {
    std::error_code ec;
    const fs::path root = fs::canonical(torch, ec);
    if (!ec && root.string().rfind("/usr/", 0) != 0) {
      spec.binds.push_back({root.string(), root.string(), true});
      const fs::path nvidia = root.parent_path() / "nvidia";
      if (fs::is_directory(nvidia, ec)) spec.binds.push_back({nvidia.string(), nvidia.string(), true});
    }
  }
  spec.disk_watch_path = student_dir_;
  spec.disk_bytes = config_.disk_limit_bytes;
  spec.disk_inodes = config_.disk_limit_inodes;
  spec.env = {{"HOME", student_dir_ + "/home"},
              {"USER", user_.name},
              {"LOGNAME", user_.name},
              // On disk, inside the disk budget, at both levels (a jail's /tmp is small memory).
              {"TMPDIR", student_dir_ + "/tmp"}};
  return spec;
}

void StudentSpace::Confine() {
  if (confine_tried_ || config_.isolation == Isolation::kNone) return;
  confine_tried_ = true;
  const IsolationProbe probe = ProbeIsolation();
  const std::string refuse = "refusing to grade: student code would run without the isolation asked for (--sandbox=" +
                             IsolationName(config_.isolation) + "): ";
  if (config_.isolation == Isolation::kFull && probe.best != Isolation::kFull) {
    throw GraderError(refuse + probe.why_not_full +
                      (probe.best == Isolation::kUser ? "; --sandbox=user runs it as its own user without namespaces" : "") +
                      "; --unsafe_no_sandbox runs it as the grader (your own code only)");
  }
  if (probe.best == Isolation::kNone) {
    throw GraderError(refuse + probe.why_not_user + "; --unsafe_no_sandbox runs it as the grader (your own code only)");
  }
  user_ = probe.user;
  level_ = config_.isolation;
  if (level_ == Isolation::kUser) ClearSharedTmp();  // what an earlier grading's student code left
  for (const char* sub : {"home", "tmp"}) fs::create_directories(student_dir_ + "/" + sub);
  GiveToStudent(student_dir_);

  // The build cache the kit was built with (setup.sh), shown read-only in a full jail; linked
  // file by file into the student's folder otherwise (the files stay the grader's, read-only).
  const std::string& cache = grader_cache_;
  disk_cache_.clear();
  JailSpec build = BaseSpec();
  if (!cache.empty()) {
    const std::string shared = student_dir_ + "/disk_cache";
    if (level_ == Isolation::kFull) {
      fs::create_directories(shared);
      build.binds.push_back({cache, shared, true});
      disk_cache_ = shared;
    } else {
      std::error_code ec;
      fs::copy(cache, shared, fs::copy_options::recursive | fs::copy_options::create_hard_links, ec);
      if (!ec) {
        for (fs::recursive_directory_iterator it(shared, ec), end; it != end; it.increment(ec)) {
          if (it->is_directory()) (void)!chown(it->path().c_str(), user_.uid, user_.gid);
        }
        (void)!chown(shared.c_str(), user_.uid, user_.gid);
        disk_cache_ = shared;
      }
    }
  }
  build.max_processes = config_.build_max_processes;
  build.cpu_seconds = 4 * config_.build_timeout_s;
  build_jail_ = std::make_unique<PreparedJail>(build);
  JailSpec run = BaseSpec();
  run.max_processes = config_.run_max_processes;
  run.cpu_seconds = std::max(60.0, 4 * config_.run_timeout_s);
  run_jail_ = std::make_unique<PreparedJail>(run);
  // Said now, in one line, rather than as every build and run failing with "Permission denied".
  for (const std::string& d : {student_dir_, shared_dir_}) {
    std::string why;
    const std::string blocked = run_jail_->BlockingAncestor(d, &why);
    if (!blocked.empty()) {
      throw GraderError("student code (as " + user_.name + ") could not reach " + d + ": it cannot pass through " +
                        blocked + " (" + why + "); let others pass (chmod o+x " + blocked +
                        ") or grade in another --work_dir");
    }
  }
}

std::string StudentSpace::StudentFolder(const std::string& name) const {
  // work/student is the student's: by the time a later run's folder is made, earlier runs may
  // have planted anything there (a link to /etc named like the next run's folder). So the name
  // is new and unguessable (mkdtemp creates it, failing on anything already there), and the
  // folder is handed over through a descriptor opened without following links, after checking
  // it is still the directory the grader just made.
  std::string d = student_dir_ + "/" + name + "_XXXXXX";
  if (mkdtemp(d.data()) == nullptr) {
    throw GraderError("cannot make a run folder in " + student_dir_ + ": " + strerror(errno));
  }
  if (!confined()) return d;
  const int fd = open(d.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  bool ok = fd >= 0 && fstat(fd, &st) == 0 && st.st_uid == geteuid();
  // HOME and TMPDIR of the run (RunJail), made before the folder is handed over.
  for (const char* sub : {"home", "tmp"}) {
    ok = ok && mkdirat(fd, sub, 0700) == 0 && fchownat(fd, sub, user_.uid, user_.gid, AT_SYMLINK_NOFOLLOW) == 0;
  }
  if (!ok || fchown(fd, user_.uid, user_.gid) != 0) {
    const std::string why = strerror(errno);
    if (fd >= 0) close(fd);
    throw GraderError("the run folder " + d + " changed between its making and its handing over (" + why + ")");
  }
  close(fd);
  return d;
}

const PreparedJail* StudentSpace::RunJail(const std::string& run_folder) {
  JailSpec run = run_jail_->spec();
  run.env["HOME"] = run_folder + "/home";
  run.env["TMPDIR"] = run_folder + "/tmp";
  runs_jails_.push_back(std::make_unique<PreparedJail>(run));
  return runs_jails_.back().get();
}

void StudentSpace::SealForRuns() {
  if (!confined() || sealed_) return;
  sealed_ = true;
  std::error_code ec;
  fs::remove_all(student_dir_ + "/disk_cache", ec);
  if (ec) throw GraderError("cannot remove the build's copy of the disk cache: " + ec.message());
  // Only what the student's user owns changes: a hard link the build made to someone else's
  // file is left as it is (its mode is not the student's to open up). No link is followed.
  std::vector<fs::path> odd;
  const auto take = [&](const fs::path& p) {
    struct stat st;
    if (lstat(p.c_str(), &st) != 0) {
      // Nothing may stay the student's unseen (a path past PATH_MAX would).
      throw GraderError("cannot take back " + p.string() + " before the runs: " + strerror(errno));
    }
    if (st.st_uid != user_.uid) return;
    if (S_ISLNK(st.st_mode)) {
      (void)!lchown(p.c_str(), 0, 0);
    } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
      // chown first: it clears set-id bits, and then the mode is root's to set.
      if (lchown(p.c_str(), 0, 0) != 0) throw GraderError("cannot take back " + p.string() + ": " + strerror(errno));
      chmod(p.c_str(), S_ISDIR(st.st_mode) ? 0755 : (st.st_mode & S_IXUSR) != 0 ? 0555 : 0444);
    } else {
      odd.push_back(p);  // a FIFO, a socket, a device node
    }
  };
  take(student_dir_);
  for (fs::recursive_directory_iterator it(student_dir_, fs::directory_options::none, ec), end; it != end;
       it.increment(ec)) {
    take(it->path());
  }
  if (ec) throw GraderError("cannot take back " + student_dir_ + " before the runs: " + ec.message());
  for (const auto& p : odd) fs::remove(p, ec);
  chmod(student_dir_.c_str(), 0755);
}

void StudentSpace::TakeBackRun(const std::string& run_folder) const {
  if (!confined()) return;
  const int fd = open(run_folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fchown(fd, 0, 0) != 0 || fchmod(fd, 0700) != 0) {
    const std::string why = strerror(errno);
    if (fd >= 0) close(fd);
    throw GraderError("cannot take back the run folder " + run_folder + " (" + why + ")");
  }
  close(fd);
  ClearSharedTmp();
}

std::string StudentSpace::GraderFolder(const std::string& name) const {
  const std::string d = grader_dir_ + "/" + name;
  std::error_code ec;
  fs::create_directories(d, ec);
  return d;
}

void StudentSpace::GiveToStudent(const std::string& path) const {
  if (!confined()) return;
  // Only for trees the grader made before any student code ran. Even so, the start must be a
  // real directory (a link there would hand its target over), and the walk follows no link
  // (lchown changes the link, never what it names).
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw GraderError("refusing to hand " + path + " to the student: it is not a directory the grader made");
  }
  (void)!lchown(path.c_str(), user_.uid, user_.gid);
  std::error_code ec;
  for (fs::recursive_directory_iterator it(path, fs::directory_options::none, ec), end; it != end; it.increment(ec)) {
    (void)!lchown(it->path().c_str(), user_.uid, user_.gid);
  }
}

std::string StudentSpace::SharedFolder(const std::string& name) const {
  const std::string d = shared_dir_ + "/" + name;
  std::error_code ec;
  fs::create_directories(d, ec);
  chmod(d.c_str(), 0755);
  return d;
}

void StudentSpace::ShareReadOnly(const std::string& path) const {
  std::error_code ec;
  chmod(path.c_str(), 0755);
  for (fs::recursive_directory_iterator it(path, ec), end; it != end; it.increment(ec)) {
    if (it->is_symlink()) continue;
    chmod(it->path().c_str(), it->is_directory() ? 0755 : 0644);
  }
}

std::string StudentSpace::Description() const {
  if (level_ == Isolation::kNone) {
    return config_.isolation == Isolation::kNone ? "student code ran as the grader's own user (--unsafe_no_sandbox)" : "";
  }
  std::string d = "student code ran as " + user_.name;
  d += level_ == Isolation::kFull ? " in its own mount, IPC and network namespaces (grader files covered, private /tmp, "
                                    "loopback only)"
                                  : " without namespaces (--sandbox=user: /tmp and the network are shared)";
  d += ", at most " + std::to_string(config_.run_max_processes) + " processes per run and " +
       GiB(config_.disk_limit_bytes) + " GiB of disk";
  return d;
}

}  // namespace distlm::grading
