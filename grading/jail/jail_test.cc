// The jail student code runs in (grading/jail/jail.h), program by program: each hostile behaviour
// the autograder must survive, done by a shell script in the jail, and what it could not do.
// Needs root (the grader's situation on Gradescope and in its image); elsewhere every case
// skips, saying so. grading/hostile_submission_test.cc does the same through whole gradings.
#include "grading/jail/jail.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"
#include "grading/jail/sandbox.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;
using ::distlm::testing::ReadFileOrEmpty;
using ::distlm::testing::WriteFileMakingDirs;

class JailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    probe_ = ProbeIsolation();
    if (probe_.best == Isolation::kNone) GTEST_SKIP() << "SKIPPED (the jail needs root): " << probe_.why_not_user;
    user_ = probe_.user;
    // In /tmp, not the test's folder under root's home: the student's user must reach it.
    work_ = MakeTempDir("distlm_jail_test", "/tmp");
    chmod(work_.c_str(), 0711);
    grader_ = work_ + "/grader";
    student_ = work_ + "/student";
    fs::create_directories(grader_);
    fs::create_directories(student_);
    chmod(grader_.c_str(), 0700);
    (void)!chown(student_.c_str(), user_.uid, user_.gid);
    WriteFileMakingDirs(grader_ + "/reference.cc", "the reference solution\n");
  }

  void TearDown() override {
    if (!work_.empty()) RemoveTree(work_);
  }

  void NeedFull() {
    if (probe_.best != Isolation::kFull) GTEST_SKIP() << "SKIPPED (no namespaces here): " << probe_.why_not_full;
  }

  JailSpec Spec(Isolation level) const {
    JailSpec spec;
    spec.level = level;
    spec.user = user_;
    spec.hidden = {grader_};
    spec.binds = {{student_, student_, false}};
    spec.max_processes = 64;
    spec.env = {{"HOME", student_}, {"TMPDIR", "/tmp"}};
    return spec;
  }

  SandboxResult Run(const JailSpec& spec, const std::string& script, double timeout_s = 20,
                    int64_t file_size_bytes = 0) {
    PreparedJail jail(spec);
    SandboxCommand c;
    c.argv = {"/bin/bash", "-c", script};
    c.working_dir = student_;
    SandboxLimits limits;
    limits.timeout_s = timeout_s;
    limits.file_size_bytes = file_size_bytes;
    limits.jail = &jail;
    SandboxResult r = RunSandboxed(c, limits);
    EXPECT_EQ(LiveProcessesOf(user_.uid), 0) << "the jail's processes outlived the command";
    return r;
  }

  JailUser user_;
  IsolationProbe probe_;
  std::string work_, grader_, student_;
};

TEST_F(JailTest, RunsAsTheStudentWhoCannotRegainPrivileges) {
  SandboxResult r = Run(Spec(probe_.best), "id -u; id -g; grep NoNewPrivs /proc/self/status; echo HOME=$HOME");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(std::to_string(user_.uid) + "\n" + std::to_string(user_.gid) + "\n"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("NoNewPrivs:\t1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("HOME=" + student_), std::string::npos) << r.output;
}

TEST_F(JailTest, TheGradersFilesCannotBeReadAtEitherLevel) {
  for (Isolation level : {Isolation::kUser, Isolation::kFull}) {
    if (level == Isolation::kFull && probe_.best != Isolation::kFull) continue;
    SandboxResult r = Run(Spec(level), "cat " + grader_ + "/reference.cc; ls " + grader_ + "; ls /root; echo done");
    EXPECT_EQ(r.output.find("the reference solution"), std::string::npos) << IsolationName(level) << ": " << r.output;
    EXPECT_EQ(r.output.find("reference.cc\n"), std::string::npos) << IsolationName(level) << ": " << r.output;
    EXPECT_NE(r.output.find("done"), std::string::npos) << r.output;
  }
}

// A full jail has a PID namespace of its own: its /proc lists the student's processes only, so no
// command line outside it (the grader's, another program's) can be read from inside.
TEST_F(JailTest, OnlyItsOwnProcessesAreVisible) {
  NeedFull();
  const std::string mine = std::to_string(getpid());
  SandboxResult r = Run(Spec(Isolation::kFull),
                        "sleep 30 & n=0; for p in /proc/[0-9]*; do n=$((n+1)); tr '\\0' ' ' < $p/cmdline; echo; done; "
                        "echo processes=$n; ls /proc/" + mine + " >/dev/null 2>&1 && echo grader''-visible; echo "
                        "self=$$; kill %1; echo done");
  ASSERT_NE(r.output.find("done"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("grader-visible"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("jail_test"), std::string::npos) << "the grader's command line is visible:\n" << r.output;
  // bash, sleep, and the loop's own subshells: a handful, not the machine's hundreds.
  const size_t at = r.output.rfind("processes=");  // the last: the first is in bash's command line
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_LE(std::stoi(r.output.substr(at + 10)), 6) << r.output;
  EXPECT_TRUE(r.isolation_note.empty()) << r.isolation_note;
}

// The full jail's root is an allow-list: a file anyone may read, outside the system and the
// folders the jail shows (Gradescope's /autograder, another clone of the repository, /opt),
// is not there at all, and / lists the allow-list alone.
TEST_F(JailTest, OnlyTheAllowListIsThere) {
  NeedFull();
  const std::string dir = MakeTempDir("distlm_jail_elsewhere", "/opt");
  chmod(dir.c_str(), 0755);
  const std::string secret = dir + "/reference.cc";
  WriteFileMakingDirs(secret, "the reference solution\n");
  chmod(secret.c_str(), 0644);
  SandboxResult r = Run(Spec(Isolation::kFull), "cat " + secret + " 2>&1; ls / | tr '\\n' ' '; echo; echo done");
  EXPECT_NE(r.output.find("done"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("the reference solution"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("No such file or directory"), std::string::npos) << r.output;
  for (const char* absent : {" opt ", " home ", " root ", " srv ", " autograder ", " mnt ", " boot "}) {
    EXPECT_EQ((" " + r.output).find(absent), std::string::npos) << absent << " is in the jail's root: " << r.output;
  }
  for (const char* present : {" usr ", " etc ", " tmp ", " proc ", " dev "}) {
    EXPECT_NE((" " + r.output).find(present), std::string::npos) << present << " is missing: " << r.output;
  }
  // As the student's user without the jail's root, the same file reads: the root is what hides it.
  SandboxResult user = Run(Spec(Isolation::kUser), "cat " + secret);
  EXPECT_NE(user.output.find("the reference solution"), std::string::npos) << user.output;
  RemoveTree(dir);
}

// A hidden path inside what the root shows (Gradescope's submission_metadata.json in a folder
// the jail binds) reads as empty, though its permissions would let anyone read it.
TEST_F(JailTest, AHiddenFileInsideAShownFolderReadsAsEmpty) {
  NeedFull();
  const std::string shared = work_ + "/shared";
  fs::create_directories(shared);
  chmod(shared.c_str(), 0755);
  const std::string meta = shared + "/submission_metadata.json";
  WriteFileMakingDirs(meta, "{\"users\": [{\"email\": \"student@example.edu\"}]}\n");
  chmod(meta.c_str(), 0644);
  JailSpec spec = Spec(Isolation::kFull);
  spec.binds.push_back({shared, shared, true});
  spec.hidden.push_back(meta);
  SandboxResult r = Run(spec, "cat " + meta + "; echo done");
  EXPECT_NE(r.output.find("done"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("student@example.edu"), std::string::npos) << r.output;
  // Unhidden, the same command reads it: the covering is what hides it.
  JailSpec shown = Spec(Isolation::kFull);
  shown.binds.push_back({shared, shared, true});
  SandboxResult s2 = Run(shown, "cat " + meta);
  EXPECT_NE(s2.output.find("student@example.edu"), std::string::npos) << s2.output;
}

TEST_F(JailTest, WritesOutsideItsFolderFailAndTmpIsPrivate) {
  NeedFull();
  const std::string marker = "/tmp/distlm_jail_marker_" + std::to_string(getpid());
  SandboxResult r = Run(Spec(Isolation::kFull), "touch /etc/distlm_jail_x; touch " + grader_ + "/forged; touch " + work_ +
                                                    "/forged; echo x > " + marker + " && echo tmp-ok; echo mine > " +
                                                    student_ + "/mine && echo student-ok");
  EXPECT_FALSE(fs::exists("/etc/distlm_jail_x"));
  EXPECT_FALSE(fs::exists(grader_ + "/forged"));
  EXPECT_FALSE(fs::exists(work_ + "/forged"));
  EXPECT_FALSE(fs::exists(marker)) << "the jail's /tmp is the machine's";
  EXPECT_NE(r.output.find("tmp-ok"), std::string::npos) << "its own /tmp must be writable: " << r.output;
  EXPECT_EQ(ReadFileOrEmpty(student_ + "/mine"), "mine\n") << r.output;
}

TEST_F(JailTest, OnlyLoopbackIsUp) {
  NeedFull();
  SandboxResult r = Run(Spec(Isolation::kFull), "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "lo\n");
  EXPECT_TRUE(r.network_isolated);
}

TEST_F(JailTest, AForkBombEndsAtTheDeadlineAndLeavesNothing) {
  SandboxResult r = Run(Spec(probe_.best), "b() { b | b & }; b; sleep 100", 4);
  EXPECT_TRUE(r.timed_out) << r.output;
  EXPECT_LT(r.seconds, 30);
}

TEST_F(JailTest, ADetachedDaemonIsKilledWithIt) {
  SandboxResult r = Run(Spec(probe_.best), "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo started");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(r.timed_out);
}

TEST_F(JailTest, IgnoringSigtermDoesNotHelp) {
  SandboxResult r = Run(Spec(probe_.best), "trap '' TERM INT; while true; do sleep 1; done", 2);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.seconds, 15);
}

TEST_F(JailTest, WritingTenGigabytesIsStoppedAtTheDiskBudget) {
  JailSpec spec = Spec(probe_.best);
  spec.disk_bytes = int64_t{256} << 20;
  spec.disk_watch_path = student_;
  // 40 files of 256 MiB (each under the file-size limit): 10 GiB if nothing stopped it.
  SandboxResult r = Run(spec, "for i in $(seq 40); do head -c 268435456 /dev/zero > f$i; done; echo wrote all", 120,
                        int64_t{300} << 20);
  EXPECT_TRUE(r.disk_limit_hit) << r.output;
  EXPECT_EQ(r.output.find("wrote all"), std::string::npos);
  int64_t total = 0;
  for (const auto& e : fs::directory_iterator(student_)) total += e.is_regular_file() ? e.file_size() : 0;
  EXPECT_LT(total, int64_t{1} << 30) << "it wrote " << total << " bytes";
}

// Empty files fill no blocks: the budget counts files too.
TEST_F(JailTest, AMillionEmptyFilesAreStoppedAtTheFileBudget) {
  JailSpec spec = Spec(probe_.best);
  spec.disk_inodes = 2000;
  spec.disk_watch_path = student_;
  SandboxResult r = Run(spec, "mkdir -p many && cd many && for i in $(seq 1000000); do : > f$i; done; echo made all", 120);
  EXPECT_TRUE(r.disk_limit_hit) << r.output;
  EXPECT_TRUE(r.inode_limit_hit) << r.output;
  EXPECT_EQ(r.output.find("made all"), std::string::npos);
  size_t files = 0;
  for (auto it = fs::directory_iterator(student_ + "/many"); it != fs::directory_iterator(); ++it) ++files;
  EXPECT_LT(files, 100000u) << "it made " << files << " files";
  std::printf("stopped after %zu empty files (budget 2000, checked every 20 ms)\n", files);
}

TEST_F(JailTest, AHundredMegabytesOfOutputAreCutToTheBound) {
  SandboxResult r = Run(Spec(probe_.best), "head -c 100000000 /dev/zero | tr '\\0' x; echo; echo the-end", 60);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_LT(r.output.size(), 300u * 1024);
  EXPECT_NE(r.output.find("bytes of output left out"), std::string::npos);
  EXPECT_NE(r.output.find("the-end"), std::string::npos) << "the tail is kept";
}

TEST_F(JailTest, TheUserLevelHasNoNamespaces) {
  SandboxResult r = Run(Spec(Isolation::kUser), "id -u; touch " + work_ + "/forged; echo done");
  EXPECT_NE(r.output.find(std::to_string(user_.uid)), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(work_ + "/forged"));
  EXPECT_FALSE(r.network_isolated);
}

// What the grader reads back from a student's folder: never through a link out, never a file
// that is not the student's, never a FIFO.
TEST(ReadUntrustedFileTest, OnlyTheRunsOwnRegularFiles) {
  const std::string root = testing::MakeTempDir("untrusted"), outside = testing::MakeTempDir("secret");
  WriteFileMakingDirs(outside + "/train_log.jsonl", "{\"loss\": 0.5}\n");
  WriteFileMakingDirs(root + "/good/train_log.jsonl", "{\"loss\": 0.7}\n");
  fs::create_directory_symlink(outside, root + "/linked_dir");
  fs::create_directories(root + "/linked_file");
  fs::create_symlink(outside + "/train_log.jsonl", root + "/linked_file/train_log.jsonl");
  fs::create_directories(root + "/fifo");
  ASSERT_EQ(mkfifo((root + "/fifo/train_log.jsonl").c_str(), 0644), 0);
  std::string out, why;
  bool truncated = false;
  EXPECT_TRUE(ReadUntrustedFile(root, root + "/good/train_log.jsonl", -1, 1 << 20, &out, &truncated, &why)) << why;
  EXPECT_EQ(out, "{\"loss\": 0.7}\n");
  for (const char* bad : {"/linked_dir/train_log.jsonl", "/linked_file/train_log.jsonl"}) {
    EXPECT_FALSE(ReadUntrustedFile(root, root + bad, -1, 1 << 20, &out, &truncated, &why)) << bad;
    EXPECT_NE(why.find("is a symbolic link (the grader follows none)"), std::string::npos) << why;
  }
  EXPECT_FALSE(ReadUntrustedFile(root, root + "/fifo/train_log.jsonl", -1, 1 << 20, &out, &truncated, &why));
  EXPECT_NE(why.find("not a regular file"), std::string::npos) << why;
  EXPECT_FALSE(ReadUntrustedFile(root, root + "/good/train_log.jsonl", static_cast<int64_t>(getuid()) + 1, 1 << 20,
                                 &out, &truncated, &why));
  EXPECT_NE(why.find("not the student's"), std::string::npos) << why;
  EXPECT_TRUE(ReadUntrustedFile(root, root + "/good/train_log.jsonl", -1, 4, &out, &truncated, &why));
  EXPECT_EQ(out, "{\"lo");
  EXPECT_TRUE(truncated);
}

// Everything else a student can leave where the grader reads: a socket, a link to a device, a
// path with '..', a run folder replaced by a link or by another folder after the grader made it.
TEST(ReadUntrustedFileTest, SocketsDevicesDotDotAndReplacedFoldersAreRefused) {
  const std::string parent = testing::MakeTempDir("untrusted_root");
  const std::string root = parent + "/run";
  fs::create_directories(root + "/out");
  const DirIdentity made = IdentityOf(root);
  ASSERT_TRUE(made.known());
  WriteFileMakingDirs(root + "/out/train_log.jsonl", "{\"loss\": 0.7}\n");
  std::string out, why;
  bool truncated = false;
  ASSERT_TRUE(ReadUntrustedFile(root, root + "/out/train_log.jsonl", -1, 1 << 20, &out, &truncated, &why, made)) << why;

  // A socket bound at the file's name: open() fails with ENXIO, nothing is read or waited for.
  // (Bound by a relative name: the test's folder is longer than a socket address may be.)
  const int s = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = root + "/out/sock.json";
  memcpy(addr.sun_path, "sock.json", 10);
  const fs::path cwd = fs::current_path();
  fs::current_path(root + "/out");
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
  fs::current_path(cwd);
  EXPECT_FALSE(ReadUntrustedFile(root, sock, -1, 1 << 20, &out, &truncated, &why, made));
  EXPECT_NE(why.find("a socket is not a file"), std::string::npos) << why;
  close(s);

  fs::create_symlink("/dev/zero", root + "/out/zero.json");
  EXPECT_FALSE(ReadUntrustedFile(root, root + "/out/zero.json", -1, 1 << 20, &out, &truncated, &why, made));
  EXPECT_NE(why.find("is a symbolic link"), std::string::npos) << why;

  EXPECT_FALSE(ReadUntrustedFile(root, root + "/out/../out/train_log.jsonl", -1, 1 << 20, &out, &truncated, &why, made));
  EXPECT_NE(why.find("'..'"), std::string::npos) << why;

  // The folder swapped for another one of the same name: its identity no longer matches.
  fs::rename(root, parent + "/moved");
  fs::create_directories(root + "/out");
  WriteFileMakingDirs(root + "/out/train_log.jsonl", "{\"loss\": 0.1}\n");
  EXPECT_FALSE(ReadUntrustedFile(root, root + "/out/train_log.jsonl", -1, 1 << 20, &out, &truncated, &why, made));
  EXPECT_NE(why.find("was replaced after the grader made it"), std::string::npos) << why;

  // ... or for a link to it.
  fs::remove_all(root);
  fs::create_directory_symlink(parent + "/moved", root);
  EXPECT_FALSE(ReadUntrustedFile(root, root + "/out/train_log.jsonl", -1, 1 << 20, &out, &truncated, &why, made));
  EXPECT_NE(why.find("is not a directory the grader made"), std::string::npos) << why;
}

}  // namespace
}  // namespace distlm::grading
