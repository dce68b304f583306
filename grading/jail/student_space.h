// The folders of one grading, and the jails its student code runs in.
//
//   work/            root, 0711: the student may pass through, not list
//   work/grader/     root, 0700 (and covered in a full jail): the grader's own runs
//   work/student/    the student's user while the submission builds: the kit, its Bazel
//                    output, HOME. Sealed before the first run (SealForRuns): root's, 0755,
//                    nothing in it writable by the student; each run then gets a folder of its
//                    own (HOME and TMPDIR inside), taken back when the run ends (TakeBackRun),
//                    so no run can read another's outputs or leave anything for a later one.
//   work/shared/     root, 0755 (shown read-only in a full jail): what the grader writes for
//                    student runs to read (the ViT's images)
//
// The submission's build and its runs are jailed (grading/jail/jail.h) at the level the grader was
// configured with; the grader refuses to grade (GraderError) when this machine cannot give it.
// The grader's own binaries (part 1's reference, the known mistakes, prebuilt binaries in
// tests) run as the grader.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grading/jail/grader_error.h"
#include "grading/jail/jail.h"

namespace distlm::grading {

// What the jail needs of the grader's settings: how student code is confined and limited, and
// what it must not see. The autograder's GraderConfig extends it.
struct SpaceLimits {
  // The checkout the grader reads (hidden from student code, as the grader's own files are).
  std::string source_root;
  // Student code (the submission's build and its runs) runs jailed at this level (jail.h); the
  // grader refuses to grade where this machine cannot give it. kNone: as the grader itself
  // (prebuilt binaries in tests; --unsafe_no_sandbox).
  Isolation isolation = Isolation::kFull;
  std::vector<std::string> hidden_paths;  // covered for student code, besides the grader's own
  std::string disk_cache;                 // shown read-only to the student's build; "": ~/.cache/distlm/bazel-disk
  int64_t disk_limit_bytes = int64_t{4} << 30;  // what student code may add to the disk, build or run
  int64_t disk_limit_inodes = 200000;           // files and folders it may make (empty files use no blocks)
  int build_max_processes = 4096;               // processes and threads of the student's user
  int run_max_processes = 1024;
  // The submission's build: the submitted files compiled and linked against the kit's libraries,
  // which the grader's own build of the clean kit made first (41 s for all five tasks on a 2-core
  // machine, measured).
  double build_timeout_s = 600;
  double run_timeout_s = 120;  // per run, start to end
};

class StudentSpace {
 public:
  StudentSpace(const SpaceLimits& config, const std::string& work);
  ~StudentSpace();

  const std::string& grader_dir() const { return grader_dir_; }
  const std::string& student_dir() const { return student_dir_; }

  // Probes this machine and prepares the jails; a no-op after the first call and when the
  // configured level is kNone. Throws GraderError, naming what is missing, when the level
  // cannot be had.
  void Confine();
  bool confined() const { return level_ != Isolation::kNone; }
  Isolation level() const { return level_; }
  const PreparedJail* build_jail() const { return build_jail_.get(); }
  const PreparedJail* run_jail() const { return run_jail_.get(); }
  // The jail of one run in `run_folder` (made by StudentFolder): run_jail()'s, with HOME and
  // TMPDIR inside that folder. Owned by this space.
  const PreparedJail* RunJail(const std::string& run_folder);
  uid_t student_uid() const { return user_.uid; }

  // The disk cache as the student's Bazel sees it ("" when there is none to share): the
  // grader's own when not confined, read-only in a full jail, linked file by file otherwise.
  const std::string& disk_cache() const { return disk_cache_; }
  // The grader's own (writable by the grader), "" when there is none.
  const std::string& grader_disk_cache() const { return grader_cache_; }

  // A fresh folder in work/student, given to the student's user: named name_XXXXXX (mkdtemp:
  // new, unguessable, made by the grader whatever earlier runs planted there) and handed over
  // through a descriptor, with home/ and tmp/ inside. Throws GraderError when it cannot be made.
  std::string StudentFolder(const std::string& name) const;

  // Once, after the submission's build and before its first run (no student process alive):
  // everything in work/student the student's user owns becomes root's (folders 0755, files
  // 0555 where the student could run them and 0444 otherwise, set-id bits gone; what is neither
  // file, folder nor link is removed), and the build's linked copy of the grader's disk cache (which holds the
  // grader's compiled reference code) goes. From then on a run can write only in its own folder.
  void SealForRuns();
  // After a run in `run_folder` ended (no student process alive): the folder becomes root's,
  // 0700, so no later run reads or changes what this one wrote (the grader still reads it: the
  // files stay the student's); at the user level, what student code left in the shared folders
  // and System V IPC goes too (ClearSharedTmp). Throws GraderError when the folder is not the
  // directory it was.
  void TakeBackRun(const std::string& run_folder) const;
  // A fresh folder in work/grader (root's, 0700; no student code reaches it).
  std::string GraderFolder(const std::string& name) const;

  // Hands a tree the grader made, before any student code ran, to the student's user (chown -R
  // without following links; nothing when not confined). Throws GraderError when `path` is not
  // a real directory.
  void GiveToStudent(const std::string& path) const;

  // A fresh folder in work/shared: the grader writes it, student code may only read it.
  std::string SharedFolder(const std::string& name) const;
  // Makes a tree the grader wrote there readable by everyone (dirs 0755, files 0644) and
  // writable by nobody but the grader.
  void ShareReadOnly(const std::string& path) const;

  // One line for the report: how student code was confined.
  std::string Description() const;

 private:
  JailSpec BaseSpec() const;
  // Removes what the student's user owns in /tmp, /var/tmp, /dev/shm and /run/lock (at any
  // depth), and its System V shared memory, message queues and semaphores; in a full jail only
  // /run/lock (the rest is the jail's own).
  void ClearSharedTmp() const;

  SpaceLimits config_;
  std::string work_, grader_dir_, student_dir_, shared_dir_;
  bool confine_tried_ = false;
  Isolation level_ = Isolation::kNone;
  JailUser user_;
  std::string grader_cache_;  // the grader's own disk cache ("" when there is none)
  std::string disk_cache_;
  std::unique_ptr<PreparedJail> build_jail_, run_jail_;
  std::vector<std::unique_ptr<PreparedJail>> runs_jails_;
  bool sealed_ = false;
};

}  // namespace distlm::grading
