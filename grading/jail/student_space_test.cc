// The grading's folders as student code sees them (grading/jail/student_space.h): what the grader
// shares with the runs (the ViT's images) can be read by every rank and changed by none,
// at either isolation level. Needs root, like grading/jail/jail_test.cc; elsewhere it skips, saying so.
#include "grading/jail/student_space.h"

#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"
#include "grading/jail/sandbox.h"

namespace distlm::grading {
namespace {

using ::distlm::testing::ReadFileOrEmpty;
using ::distlm::testing::WriteFileMakingDirs;

// Both levels where this machine gives them; full's absence said.
std::vector<Isolation> LevelsHere(const IsolationProbe& probe) {
  if (probe.best == Isolation::kFull) return {Isolation::kUser, Isolation::kFull};
  std::printf("SKIPPED at level full (no namespaces here): %s\n", probe.why_not_full.c_str());
  return {Isolation::kUser};
}

TEST(StudentSpaceTest, SharedDataIsReadableAndReadOnlyForStudentCode) {
  const IsolationProbe probe = ProbeIsolation();
  if (probe.best == Isolation::kNone) GTEST_SKIP() << "SKIPPED (the jail needs root): " << probe.why_not_user;
  for (Isolation level : LevelsHere(probe)) {
    // In /tmp, not the test's folder under root's home: the student's user must reach it.
    const std::string work = MakeTempDir("distlm_space_test", "/tmp");
    {
      SpaceLimits config;
      config.isolation = level;
      StudentSpace space(config, work);
      space.Confine();
      const std::string data = space.SharedFolder("cifar10");
      const mode_t old_mask = ::umask(0077);  // files 0600, folders 0700: ShareReadOnly must open them up
      WriteFileMakingDirs(data + "/sub/data_batch_1.bin", "the grader's images\n");
      WriteFileMakingDirs(data + "/test_batch.bin", "held out\n");
      ::umask(old_mask);
      space.ShareReadOnly(data);

      const std::string run = space.StudentFolder("run");
      SandboxCommand c;
      c.argv = {"/bin/bash", "-c",
                "cat " + data + "/sub/data_batch_1.bin " + data + "/test_batch.bin; echo forged > " + data +
                    "/sub/data_batch_1.bin; touch " + data + "/new.bin; rm -f " + data + "/test_batch.bin; mv " + data +
                    " " + run + "/taken; echo done"};
      c.working_dir = run;
      SandboxLimits limits;
      limits.timeout_s = 20;
      limits.jail = space.run_jail();
      const SandboxResult r = RunSandboxed(c, limits);
      const std::string name = IsolationName(level);
      EXPECT_NE(r.output.find("the grader's images\nheld out\n"), std::string::npos)
          << name << ": student code must read the shared data: " << r.output;
      EXPECT_NE(r.output.find("done"), std::string::npos) << name << ": " << r.output;
      EXPECT_EQ(ReadFileOrEmpty(data + "/sub/data_batch_1.bin"), "the grader's images\n") << name << ": " << r.output;
      EXPECT_EQ(ReadFileOrEmpty(data + "/test_batch.bin"), "held out\n") << name << ": " << r.output;
      struct stat st {};
      EXPECT_NE(::stat((data + "/new.bin").c_str(), &st), 0) << name << ": student code added a file to the data";
      std::printf("level %s: shared data read, every change refused\n", name.c_str());
    }
    RemoveTree(work);
  }
}

// --sandbox=user shares /tmp with the machine: what student code left there is gone once the
// grading ends, and nothing of anyone else's is touched.
TEST(StudentSpaceTest, TheUserLevelClearsWhatStudentCodeLeftInTmp) {
  const IsolationProbe probe = ProbeIsolation();
  if (probe.best == Isolation::kNone) GTEST_SKIP() << "SKIPPED (the jail needs root): " << probe.why_not_user;
  const std::string work = MakeTempDir("distlm_space_test", "/tmp");
  const std::string left = "/tmp/distlm_left_" + std::to_string(getpid());
  const std::string roots = "/tmp/distlm_roots_" + std::to_string(getpid());
  WriteFileMakingDirs(roots, "root's\n");
  {
    SpaceLimits config;
    config.isolation = Isolation::kUser;
    StudentSpace space(config, work);
    space.Confine();
    SandboxCommand c;
    c.argv = {"/bin/bash", "-c", "mkdir -p " + left + "/sub && echo planted > " + left + "/sub/f && echo done"};
    c.working_dir = "/";
    SandboxLimits limits;
    limits.timeout_s = 20;
    limits.jail = space.run_jail();
    const SandboxResult r = RunSandboxed(c, limits);
    ASSERT_NE(r.output.find("done"), std::string::npos) << r.output;
    struct stat st {};
    ASSERT_EQ(::lstat(left.c_str(), &st), 0) << "student code could not write to /tmp";
  }
  struct stat st {};
  EXPECT_NE(::lstat(left.c_str(), &st), 0) << left << " outlived the grading";
  EXPECT_EQ(ReadFileOrEmpty(roots), "root's\n");
  RemoveTree(work);
  RemoveTree(roots);
  RemoveTree(left);
}

// After a student program ran, work/student holds whatever it left: links named like the next
// run's folder, links to root's folders, FIFOs, hard links. The folder the grader makes next is
// new, a real directory, the student's; nothing the links name changes owner.
TEST(StudentSpaceTest, WhatARunPlantsInTheStudentFolderIsNeverFollowed) {
  const IsolationProbe probe = ProbeIsolation();
  if (probe.best == Isolation::kNone) GTEST_SKIP() << "SKIPPED (the jail needs root): " << probe.why_not_user;
  const std::string work = MakeTempDir("distlm_space_test", "/tmp");
  const std::string victim = MakeTempDir("distlm_victim", "/tmp");  // root's, as /etc would be
  WriteFileMakingDirs(victim + "/passwd", "root's file\n");
  {
    SpaceLimits config;
    config.isolation = probe.best;
    StudentSpace space(config, work);
    space.Confine();
    const std::string sd = space.student_dir();
    const std::string first = space.StudentFolder("run_task2a_0");
    // What a hostile run does: every name the grader used to make next, linked to root's folder.
    std::string plant = "cd " + sd + " && ";
    for (const char* name : {"run_task2b_1", "run_task2b_1_aaaaaa", "run_task3_2", "kit2"}) {
      plant += std::string("ln -s ") + victim + " " + name + "; ";
    }
    plant += "mkfifo run_task5_3; ln " + victim + "/passwd hard_passwd 2>/dev/null; ln -s /etc etc; echo planted";
    SandboxCommand c;
    c.argv = {"/bin/bash", "-c", plant};
    c.working_dir = first;
    SandboxLimits limits;
    limits.timeout_s = 20;
    limits.jail = space.run_jail();
    const SandboxResult r = RunSandboxed(c, limits);
    ASSERT_NE(r.output.find("planted"), std::string::npos) << r.output;

    for (const char* name : {"run_task2b_1", "run_task3_2", "run_task5_3"}) {
      const std::string made = space.StudentFolder(name);
      struct stat st {};
      ASSERT_EQ(::lstat(made.c_str(), &st), 0) << made;
      EXPECT_TRUE(S_ISDIR(st.st_mode)) << made << " must be a real directory, not what the run planted";
      EXPECT_EQ(st.st_uid, space.student_uid()) << made;
      EXPECT_NE(made, sd + "/" + name) << "the folder's name must not be guessable";
    }
    // Handing over a planted link is refused, not followed.
    EXPECT_THROW(space.GiveToStudent(sd + "/run_task2b_1"), GraderError);
    EXPECT_THROW(space.GiveToStudent(sd + "/etc"), GraderError);
    struct stat v {};
    ASSERT_EQ(::stat(victim.c_str(), &v), 0);
    EXPECT_EQ(v.st_uid, 0u) << "root's folder was handed to the student";
    ASSERT_EQ(::stat((victim + "/passwd").c_str(), &v), 0);
    EXPECT_EQ(v.st_uid, 0u) << "root's file was handed to the student";
    ASSERT_EQ(::stat("/etc", &v), 0);
    EXPECT_EQ(v.st_uid, 0u);
    std::printf("links, a FIFO and a hard link planted in %s: none followed, /etc and %s still root's\n", sd.c_str(),
                victim.c_str());
  }
  RemoveTree(work);
  RemoveTree(victim);
}

// A run must not see what an earlier run wrote, nor leave anything for a later one: a
// submission whose correct part 1 hid its log, or whose later task read part 1's folder, could
// otherwise hand in part 1's outputs for every task (same seed, same batch). After the seal the
// kit stays readable and runnable, each run writes in its own folder only (HOME and TMPDIR
// there), and a finished run's folder is the grader's, which still reads it.
TEST(StudentSpaceTest, NoRunReachesWhatAnEarlierRunWrote) {
  const IsolationProbe probe = ProbeIsolation();
  if (probe.best == Isolation::kNone) GTEST_SKIP() << "SKIPPED (the jail needs root): " << probe.why_not_user;
  for (Isolation level : LevelsHere(probe)) {
    const std::string name = IsolationName(level);
    const std::string work = MakeTempDir("distlm_space_test", "/tmp");
    const std::string stash_tmp = "/tmp/distlm_stash_" + std::to_string(getpid());
    // root's, world-writable and sticky, as /tmp/.X11-unix is: a stash one level down.
    const std::string shared_tmp = "/tmp/distlm_shared_" + std::to_string(getpid());
    ::mkdir(shared_tmp.c_str(), 0755);
    ::chmod(shared_tmp.c_str(), 01777);
    // The grader's disk cache holds its compiled reference code: the build sees it (linked file
    // by file at the user level), no run does.
    const std::string cache = MakeTempDir("distlm_cache_test", "/tmp");  // 0700: root's, as its home is
    WriteFileMakingDirs(cache + "/cas/b3/reference_object", "THE GRADER'S REFERENCE\n");
    ::chmod((cache + "/cas").c_str(), 0755);
    ::chmod((cache + "/cas/b3").c_str(), 0755);
    ::chmod((cache + "/cas/b3/reference_object").c_str(), 0644);
    {
      SpaceLimits config;
      config.isolation = level;
      config.disk_cache = cache;
      StudentSpace space(config, work);
      space.Confine();
      const std::string sd = space.student_dir();
      SandboxLimits limits;
      limits.timeout_s = 20;
      const auto student = [&](const std::string& script, const std::string& dir, const PreparedJail* jail) {
        SandboxCommand c;
        c.argv = {"/bin/bash", "-c", script};
        c.working_dir = dir;
        limits.jail = jail;
        return RunSandboxed(c, limits).output;
      };
      // The build: a kit with a program in it, as the student's user.
      ASSERT_NE(student("mkdir -p kit/bin && printf '#!/bin/sh\necho kit runs\n' > kit/bin/prog && chmod 0700 "
                        "kit/bin kit/bin/prog && echo built",
                        sd, space.run_jail())
                    .find("built"),
                std::string::npos);
      if (level == Isolation::kUser) {
        EXPECT_EQ(ReadFileOrEmpty(sd + "/disk_cache/cas/b3/reference_object"), "THE GRADER'S REFERENCE\n")
            << "the build's copy of the disk cache is not there: this test would not see it go";
      }
      space.SealForRuns();

      const std::string first = space.StudentFolder("run_part1_0");
      const std::string wrote = student(
          "mkdir out && echo 'the right answer' > out/train_log.jsonl && echo STASHED_IN_HOME > $HOME/h && echo STASHED_IN_TMPDIR > $TMPDIR/t "
          "&& echo ran; echo STASHED_IN_WORK > " + sd + "/stash || echo 'stash refused'; echo x >> " + sd +
              "/kit/bin/prog || echo 'kit refused'; mkdir " + sd + "/kit/new || echo 'mkdir refused'; echo STASHED_IN_TMP > " +
              stash_tmp + "; echo STASHED_DEEP > " + shared_tmp + "/stash; ipcmk -M 4096 && echo 'shm made'; " +
              sd + "/kit/bin/prog",
          first, space.RunJail(first));
      for (const char* said : {"ran", "stash refused", "kit refused", "mkdir refused", "shm made", "kit runs"}) {
        EXPECT_NE(wrote.find(said), std::string::npos) << name << ": '" << said << "' missing from:\n" << wrote;
      }
      // A segment handed to another owner still serves its creator: hand it to root, as
      // shmctl(IPC_SET) from the run could.
      if (const size_t at = wrote.find("Shared memory id: "); at != std::string::npos && level == Isolation::kUser) {
        const int id = std::atoi(wrote.c_str() + at + 18);
        struct shmid_ds ds {};
        ASSERT_EQ(::shmctl(id, IPC_STAT, &ds), 0) << "segment " << id;
        ds.shm_perm.uid = 0;
        ASSERT_EQ(::shmctl(id, IPC_SET, &ds), 0) << "segment " << id;
      }
      space.TakeBackRun(first);
      // No System V object of the student's outlives the run (a full jail's IPC namespace ends
      // with it; the user level removes them).
      const std::string shm = ReadFileOrEmpty("/proc/sysvipc/shm");
      size_t student_segments = 0;
      for (size_t at = shm.find('\n'); at != std::string::npos && at + 1 < shm.size(); at = shm.find('\n', at + 1)) {
        std::istringstream row(shm.substr(at + 1, shm.find('\n', at + 1) - at - 1));
        std::vector<std::string> f;
        for (std::string v; row >> v;) f.push_back(v);
        const std::string student = std::to_string(space.student_uid());
        student_segments += f.size() > 9 && (f[7] == student || f[9] == student);  // owner, creator
      }
      EXPECT_EQ(student_segments, 0u) << name << ": the run's shared memory segment outlived it:\n" << shm;

      const std::string second = space.StudentFolder("run_task2a_1");
      const std::string read = student("cat " + sd + "/disk_cache/cas/b3/reference_object " + cache +
                                           "/cas/b3/reference_object " + first + "/out/train_log.jsonl " + first +
                                           "/home/h " + first + "/tmp/t " + sd +
                                           "/stash " + stash_tmp + " " + shared_tmp + "/stash 2>&1; ls " + first + " 2>&1; echo read",
                                       second, space.RunJail(second));
      EXPECT_NE(read.find("read"), std::string::npos) << name << ": " << read;
      for (const char* leaked : {"THE GRADER'S REFERENCE", "the right answer", "STASHED_IN_HOME", "STASHED_IN_TMPDIR", "STASHED_IN_WORK", "STASHED_IN_TMP\n", "STASHED_DEEP"}) {
        EXPECT_EQ(read.find(leaked), std::string::npos) << name << ": a later run read '" << leaked << "':\n" << read;
      }
      EXPECT_EQ(ReadFileOrEmpty(first + "/out/train_log.jsonl"), "the right answer\n") << name;
      struct stat st {};
      ASSERT_EQ(::stat(first.c_str(), &st), 0);
      EXPECT_EQ(st.st_uid, 0u) << name << ": the finished run's folder must be the grader's";
      std::printf("level %s: a run wrote in its own folder only; the next one read nothing of it:\n%s", name.c_str(),
                  read.c_str());
    }
    EXPECT_EQ(ReadFileOrEmpty(cache + "/cas/b3/reference_object"), "THE GRADER'S REFERENCE\n")
        << "removing the build's copy must leave the grader's cache as it was";
    RemoveTree(work);
    RemoveTree(stash_tmp);
    RemoveTree(shared_tmp);
    RemoveTree(cache);
  }
}

// A --work_dir inside a folder the student's user cannot pass (a 0700 home, a 0700 temporary
// folder): every build and run would end in "Permission denied". The grader says so once,
// before any student code runs, naming that folder; let through, the same folder is accepted.
TEST(StudentSpaceTest, AFolderTheStudentCannotPassIsNamedBeforeAnyBuild) {
  const IsolationProbe probe = ProbeIsolation();
  if (probe.best == Isolation::kNone) GTEST_SKIP() << "SKIPPED (the jail needs root): " << probe.why_not_user;
  for (Isolation level : LevelsHere(probe)) {
    const std::string parent = MakeTempDir("distlm_closed", "/var/lib");
    ::chmod(parent.c_str(), 0700);
    const std::string work = parent + "/work";
    const std::string name = IsolationName(level);
    SpaceLimits config;
    config.isolation = level;
    if (level == Isolation::kFull) {
      // The full jail's root makes the way down to the student's folder itself (root's, 0755):
      // a grading works from a folder only root may pass.
      StudentSpace space(config, work);
      EXPECT_NO_THROW(space.Confine()) << name << ": a work folder under " << parent << " (0700)";
      RemoveTree(parent);
      continue;
    }
    try {
      StudentSpace space(config, work);
      space.Confine();
      ADD_FAILURE() << name << ": Confine accepted a work folder under " << parent << " (0700)";
    } catch (const GraderError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("cannot pass through " + parent + " (mode 0700, owner root)"), std::string::npos) << what;
      EXPECT_NE(what.find("--work_dir"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
      std::printf("level %s, closed: %s\n", name.c_str(), what.c_str());
    }
    ::chmod(parent.c_str(), 0711);
    {
      StudentSpace space(config, work);
      EXPECT_NO_THROW(space.Confine()) << name << ": " << parent << " is 0711 now";
    }
    RemoveTree(parent);
  }
}

}  // namespace
}  // namespace distlm::grading
