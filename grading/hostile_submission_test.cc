// Hostile submissions, graded for real (a kit of this checkout, a nested Bazel build, jailed
// runs): each hostile task scores 0 with a message that says what happened, nothing it tried
// leaks or sticks, and the grader finishes and writes a valid results.json. A correct task
// beside them still gets its marks. Needs root (the grader's situation on Gradescope and in its
// image); elsewhere it skips, saying so. grading/jail/jail_test.cc checks the jail program by program.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/stages/stages.h"
#include "common/testing/subprocess.h"
#include "grading/autograde_testing.h"
#include "grading/jail/sandbox.h"
#include "grading/text.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;
using ::distlm::testing::ReadFileOrEmpty;
using ::distlm::testing::WriteFileMakingDirs;

// Helpers every hostile file starts with. RANK is set by the launcher for each rank.
constexpr const char* kPrelude = R"(// A hostile submission (grading/hostile_submission_test.cc).
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
extern char** environ;
extern "C" const char hostile_blob[];  // what a file embeds with .incbin, where one does
namespace hostile {
inline std::string OutputDir() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(in, arg, '\0')) {
    if (arg.rfind("--output_dir=", 0) == 0) return arg.substr(13);
  }
  return "";
}
inline std::string WorkDir() {  // OutputDir() is work/student/<run>/out
  std::string d = OutputDir();
  for (int i = 0; i < 3; ++i) d = d.substr(0, d.rfind('/'));
  return d;
}
inline int Rank() { const char* r = std::getenv("RANK"); return r == nullptr ? 0 : std::atoi(r); }
inline void Say(const std::string& s) { std::fprintf(stderr, "HOSTILE %s\n", s.c_str()); std::fflush(stderr); }
inline void TryRead(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) { Say("read " + path + ": " + std::strerror(errno)); return; }
  char buf[48] = {0};
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  Say("read " + path + ": LEAKED " + std::string(buf, n));
}
inline void TryWrite(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) { Say("write " + path + ": " + std::strerror(errno)); return; }
  std::fputs(text.c_str(), f);
  std::fclose(f);
  Say("write " + path + ": WRITTEN");
}
}  // namespace hostile
)";

// A task's reference file with `body` run before main() in every rank.
std::string WithStartup(const std::string& id, const std::string& body) {
  const stages::Row* st = stages::Find(id);
  return std::string(kPrelude) + ReadFileOrEmpty(testing::Checkout() + "/" + st->id + "/reference/" + st->files[0]) +
         "\nnamespace {\nconst int hostile_startup = [] {\n" + body + "\n  return 0;\n}();\n}  // namespace\n";
}

// `text` as the stage's first file, its other files (task 3 has two) from the reference.
void Put(const std::string& dir, const std::string& id, const std::string& text) {
  const stages::Row* st = stages::Find(id);
  WriteFileMakingDirs(dir + "/" + id + "/" + st->files[0], text);
  for (size_t i = 1; i < st->files.size(); ++i) {
    WriteFileMakingDirs(dir + "/" + id + "/" + st->files[i],
                        ReadFileOrEmpty(testing::Checkout() + "/" + st->id + "/reference/" + st->files[i]));
  }
}

double StageScore(const nlohmann::json& results, const std::string& id) {
  double s = 0;
  for (const auto& t : results["tests"]) {
    if (t["name"].get<std::string>().rfind(id + ": ", 0) == 0) s += t["score"].get<double>();
  }
  return s;
}

std::string StageOutput(const nlohmann::json& results, const std::string& id) {
  std::string s;
  for (const auto& t : results["tests"]) {
    if (t["name"].get<std::string>().rfind(id + ": ", 0) == 0) s += t["output"].get<std::string>() + "\n";
  }
  return s;
}

// What every grading here must leave: a results.json with the fields Gradescope reads, and no
// process of the student's user.
void ExpectValidResults(const Graded& g) {
  ASSERT_EQ(g.exit_code, 0) << g.output;
  ASSERT_TRUE(g.results.is_object()) << "results.json is not JSON:\n" << g.output;
  EXPECT_TRUE(g.results["score"].is_number());
  EXPECT_TRUE(g.results["execution_time"].is_number());
  for (const auto& t : g.results["tests"]) {
    for (const char* key : {"name", "score", "max_score", "output", "visibility"}) EXPECT_TRUE(t.contains(key)) << key;
  }
  JailUser user;
  std::string error;
  if (FindJailUser(&user, &error)) {
    EXPECT_EQ(LiveProcessesOf(user.uid), 0) << "student processes outlived the grading";
  }
}

class HostileSubmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const IsolationProbe probe = ProbeIsolation();
    if (probe.best != Isolation::kFull) {
      GTEST_SKIP() << "SKIPPED: the full jail cannot be made here (" << probe.why_not_full
                   << "); the hostile suite needs root with namespaces";
    }
    ASSERT_FALSE(testing::Checkout().empty());
  }
  // Short limits: a hang costs this much.
  const std::vector<std::string> flags_ = {"--run_timeout_s=20", "--recognise_mistakes=false", "--disk_limit_gib=1"};
};

// Each grading costs a kit, two Bazel builds and a run of every task (~20 s before any task
// runs), so each task of a grading carries an attack of its own: four gradings (the build that
// never ends needs its own, with a short build limit), not the five there were.
TEST_F(HostileSubmissionTest, ReadingSecretsForgingResultsFillingTheDiskAndASegfaultAtRankTwo) {
  const std::string dir = testing::MakeTempDir("hostile_a");
  const std::string results_dir = testing::MakeTempDir("results");
  WriteFileMakingDirs(results_dir + "/secret.txt", "TOP SECRET GRADER FILE\n");
  const std::string grader = testing::Runfile("grading/autograde");
  // Part 1 is a correct solution: the jail must not cost it anything. It also tries to leave
  // its log (the right answer for every task: same seed, same batch) where task2b could hand it
  // in as its own.
  WriteFileMakingDirs(dir + "/part1/train_step.cc", WithStartup("part1", R"(
  static const std::string out = hostile::OutputDir();
  if (out.find("/run_part1_") != std::string::npos) {
    std::atexit([] {
      std::ifstream in(out + "/train_log.jsonl");
      const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const char* home = std::getenv("HOME");
      for (const std::string& to : {hostile::WorkDir() + "/student/stash_log", std::string(home ? home : "") + "/stash_log",
                                    std::string("/tmp/stash_log"), std::string("/dev/shm/stash_log")}) {
        hostile::TryWrite(to, "STASHED " + log.substr(0, 24));
      }
    });
  })"));
  // task2a dies of a segfault at rank 2.
  Put(dir, "task2a", WithStartup("task2a", "  if (hostile::Rank() == 2) raise(SIGSEGV);"));
  // task2b reads what the grader has: reference sources, the grader, its results, its own runs.
  Put(dir, "task2b", WithStartup("task2b", R"(
  if (hostile::Rank() == 0) {
    hostile::TryRead(")" + testing::Checkout() + R"(/task2b/reference/grad_sync.cc");
    hostile::TryRead(")" + testing::Checkout() + R"(/part1/reference/train_step.cc");
    hostile::TryRead(")" + grader + R"(");
    hostile::TryRead(")" + results_dir + R"(/secret.txt");
    hostile::TryRead(hostile::WorkDir() + "/grader/expected/out/train_log.jsonl");
    hostile::TryRead("/root/.bash_history");
    // Part 1's own run, and where it tried to leave its log.
    const std::string student = hostile::WorkDir() + "/student";
    if (DIR* d = opendir(student.c_str())) {
      for (dirent* e = readdir(d); e != nullptr; e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.rfind("run_part1_", 0) != 0) continue;
        hostile::TryRead(student + "/" + name + "/out/train_log.jsonl");
        hostile::TryRead(student + "/" + name + "/home/stash_log");
      }
      closedir(d);
    }
    for (const std::string& from : {student + "/stash_log", std::string("/tmp/stash_log"), std::string("/dev/shm/stash_log")}) {
      hostile::TryRead(from);
    }
  } else {
    sleep(3);  // rank 0 exits first: a rank that ended first would have the launcher stop rank 0
               // before it printed what it read (seen once on a loaded machine)
  }
  std::exit(3);)"));
  // task3 forges: its log a link to the grader's own run, results.json, files outside.
  Put(dir, "task3", WithStartup("task3", R"(
  if (hostile::Rank() == 0) {
    const std::string out = hostile::OutputDir();
    mkdir(out.c_str(), 0755);
    symlink((hostile::WorkDir() + "/grader/expected/out/train_log.jsonl").c_str(), (out + "/train_log.jsonl").c_str());
    hostile::TryWrite(")" + results_dir + R"(/results.json", "{\"score\": 1000, \"tests\": []}");
    hostile::TryWrite(hostile::WorkDir() + "/grader/forged", "x");
    hostile::TryWrite(")" + dir + R"(/forged", "x");
    hostile::TryWrite("/etc/distlm_hostile", "x");
  }
  std::exit(0);)"));
  // task5 writes 10 GB in files of 256 MiB.
  Put(dir, "task5", WithStartup("task5", R"(
  if (hostile::Rank() == 0) {
    static char block[1 << 20];
    for (int f = 0; f < 40; ++f) {
      FILE* out = std::fopen((hostile::OutputDir() + "_" + std::to_string(f)).c_str(), "wb");
      if (out == nullptr) break;
      for (int i = 0; i < 256; ++i) std::fwrite(block, 1, sizeof(block), out);
      std::fclose(out);
    }
    hostile::Say("wrote 10 GB");
  }
  std::exit(0);)"));
  // task6 embeds, at build time, a reference from a second clone outside the grader's (readable by
  // anyone, named by no hidden path): `.incbin` is read by the assembler, which no include check
  // sees. Its rank 0 would print it.
  const std::string clone = MakeTempDir("distlm_other_clone", "/srv");
  ::chmod(clone.c_str(), 0755);
  const std::string copied = clone + "/task2b/reference/grad_sync.cc";
  WriteFileMakingDirs(copied, "REFERENCE FROM ANOTHER CLONE\n");
  ::chmod((clone + "/task2b").c_str(), 0755);
  ::chmod((clone + "/task2b/reference").c_str(), 0755);
  ::chmod(copied.c_str(), 0644);
  Put(dir, "task6", WithStartup("task6", R"(
  if (hostile::Rank() == 0) hostile::Say(std::string("embedded: LEAKED ") + hostile_blob);
  std::exit(3);)") + "\nasm(\".section .rodata\\n.globl hostile_blob\\nhostile_blob:\\n.incbin \\\"" + copied +
                             "\\\"\\n.byte 0\\n.text\\n\");\n");
  Graded g = GradeWithCommand(dir, flags_, results_dir);
  RemoveTree(clone);
  ExpectValidResults(g);
  const nlohmann::json& r = g.results;
  EXPECT_EQ(StageScore(r, "part1"), 10) << StageOutput(r, "part1");
  const std::string embedded = StageOutput(r, "task6");
  EXPECT_EQ(StageScore(r, "task6"), 0) << embedded;
  EXPECT_NE(embedded.find("does not compile"), std::string::npos) << embedded;
  EXPECT_NE(embedded.find("file not found: " + copied), std::string::npos) << embedded;
  EXPECT_EQ(r.dump().find("REFERENCE FROM ANOTHER CLONE"), std::string::npos) << embedded;
  const std::string segv = StageOutput(r, "task2a");
  EXPECT_EQ(StageScore(r, "task2a"), 0) << segv;
  EXPECT_NE(segv.find("SIGSEGV"), std::string::npos) << segv;
  EXPECT_NE(segv.find("rank 2"), std::string::npos) << segv;

  const std::string reads = StageOutput(r, "task2b");
  EXPECT_EQ(StageScore(r, "task2b"), 0) << reads;
  EXPECT_NE(reads.find("exited with code 3"), std::string::npos) << reads;
  EXPECT_NE(reads.find("HOSTILE read"), std::string::npos) << reads;
  EXPECT_NE(reads.find("/out/train_log.jsonl: Permission denied"), std::string::npos)
      << "task2b should have found part 1's finished run, and been refused it:\n" << reads;
  EXPECT_EQ(reads.find("LEAKED"), std::string::npos) << reads;
  EXPECT_EQ(r.dump().find("TOP SECRET"), std::string::npos);

  const std::string forged = StageOutput(r, "task3");
  EXPECT_EQ(StageScore(r, "task3"), 0) << forged;
  EXPECT_NE(forged.find("logged 0 of the 5 updates"), std::string::npos) << forged;
  EXPECT_NE(forged.find("is a symbolic link (the grader follows none)"), std::string::npos) << forged;
  EXPECT_EQ(forged.find("WRITTEN"), std::string::npos) << forged;
  EXPECT_FALSE(fs::exists("/etc/distlm_hostile"));
  EXPECT_FALSE(fs::exists(dir + "/forged"));
  EXPECT_NE(r["score"].get<double>(), 1000);

  const std::string disk = StageOutput(r, "task5");
  EXPECT_EQ(StageScore(r, "task5"), 0) << disk;
  EXPECT_NE(disk.find("wrote more than 1 GiB"), std::string::npos) << disk;
  EXPECT_EQ(disk.find("wrote 10 GB"), std::string::npos) << disk;
  EXPECT_NE(r["output"].get<std::string>().find("in its own mount, IPC and network namespaces"), std::string::npos)
      << r["output"];
}

// Task 5 here is also the sleeper (it waits for nothing and ignores SIGTERM). Part 1 stays
// out: a submitted part 1 is compiled into every task, so a hang there would hang them all.
TEST_F(HostileSubmissionTest, AForkBombADeadlockAFloodOfOutputAndASleeperIgnoringSigtermEndInTime) {
  const std::string dir = testing::MakeTempDir("hostile_b");
  Put(dir, "task2a", WithStartup("task2a", "  for (;;) fork();"));
  // Rank 0 never joins the all-reduce the others wait in (it waits for nothing instead; a rank
  // that skipped it would meet the others' next collective with the wrong size, which Gloo
  // reports at once: "the ranks' collectives did not match").
  std::string deadlock = "#include <unistd.h>\n" + ReadFileOrEmpty(testing::Checkout() + "/task2b/reference/grad_sync.cc");
  const std::string body = "void SyncGradients(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters) {";
  ASSERT_NE(deadlock.find(body), std::string::npos) << "the task2b reference changed; update this case";
  deadlock.replace(deadlock.find(body), body.size(), body + "\n  while (pg.getRank() == 0) pause();");
  Put(dir, "task2b", deadlock);
  Put(dir, "task3", WithStartup("task3", R"(
  if (hostile::Rank() == 0) {
    std::string line(999, 'x');
    for (int i = 0; i < 100000; ++i) std::printf("%s\n", line.c_str());
  }
  std::exit(3);)"));
  Put(dir, "task5", WithStartup("task5", R"(
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  for (;;) pause();)"));
  Graded g = GradeWithCommand(dir, flags_);
  ExpectValidResults(g);
  const nlohmann::json& r = g.results;
  EXPECT_EQ(r["score"].get<double>(), 0) << g.output;
  for (const char* id : {"task2a", "task2b", "task5"}) {
    EXPECT_NE(StageOutput(r, id).find("no progress within 20 s"), std::string::npos) << id << ":\n" << StageOutput(r, id);
  }
  EXPECT_NE(StageOutput(r, "task2b").find("waiting in a collective"), std::string::npos);
  const std::string flood = StageOutput(r, "task3");
  EXPECT_NE(flood.find("exited with code 3"), std::string::npos) << flood;
  EXPECT_LT(r.dump().size(), 200u * 1024) << "100 MB of output must not reach results.json";
}

TEST_F(HostileSubmissionTest, ABuildThatNeverEndsIsStopped) {
  const std::string dir = testing::MakeTempDir("hostile_d");
  // Constant evaluation that takes hours, in little memory.
  Put(dir, "task3", ReadFileOrEmpty(testing::Checkout() + "/task3/reference/" + stages::Find("task3")->files[0]) + R"(
namespace hostile {
constexpr long Spin(long k) {
  long x = 0;
  for (long i = 0; i < 200000; ++i) x += i ^ k;
  return x;
}
template <long N, long W> struct Slow { static constexpr long v = Spin(N * 1000 + W) + Slow<N - 1, W>::v; };
template <long W> struct Slow<0, W> { static constexpr long v = 0; };
#define HOSTILE_ROW(w) Slow<800, w>::v,
#define HOSTILE_R10(w) HOSTILE_ROW(w##0) HOSTILE_ROW(w##1) HOSTILE_ROW(w##2) HOSTILE_ROW(w##3) HOSTILE_ROW(w##4) \
  HOSTILE_ROW(w##5) HOSTILE_ROW(w##6) HOSTILE_ROW(w##7) HOSTILE_ROW(w##8) HOSTILE_ROW(w##9)
long table[] = {HOSTILE_R10(1) HOSTILE_R10(2) HOSTILE_R10(3)};
}  // namespace hostile
)");
  std::vector<std::string> flags = flags_;
  flags.push_back("--build_timeout_s=20");  // any limit stops it; a short one costs less
  Graded g = GradeWithCommand(dir, flags);
  ExpectValidResults(g);
  const std::string build = Named(g.results, "task3: builds")["output"];
  EXPECT_NE(build.find("the build did not finish within 20 s and was stopped"), std::string::npos) << build;
  EXPECT_EQ(g.results["score"].get<double>(), 0);
}

// The forged-output attacks in one grading. Part 1 makes its gradients NaN (an honest NaN: logged as null,
// which once crashed the grader); task 2a plants links, FIFOs and hard links where the grader
// used to make the next runs' folders; task 2b tries every way to start a process or re-execute
// itself (the replay); task 3 prints lines that imitate the grader's verdict; task 5 looks for
// other processes' command lines. Every task scores 0 with its message, nothing is followed or
// handed over, and results.json is written.
TEST_F(HostileSubmissionTest, ForgeriesReplaysAndPlantedLinksGetNothing) {
  const std::string dir = testing::MakeTempDir("hostile_e");
  const std::string victim = testing::MakeTempDir("victim");  // root's, as /etc or the grader's files are
  ::chmod(victim.c_str(), 0755);
  WriteFileMakingDirs(victim + "/passwd", "root's file\n");
  std::string part1 = ReadFileOrEmpty(testing::Checkout() + "/part1/reference/train_step.cc");
  const std::string backward = "void Backward(const torch::Tensor& loss) { loss.backward(); }";
  ASSERT_NE(part1.find(backward), std::string::npos) << "part 1's reference changed; update this case";
  part1.replace(part1.find(backward), backward.size(),
                "void Backward(const torch::Tensor& loss) { (loss * std::nan(\"\")).backward(); }");
  WriteFileMakingDirs(dir + "/part1/train_step.cc", "#include <cmath>\n" + part1);
  Put(dir, "task2a", WithStartup("task2a", R"(
  if (hostile::Rank() == 0) {
    const std::string student = hostile::WorkDir() + "/student";
    for (const char* name : {"run_task2b_1", "run_task3_2", "run_task3_3", "run_task3_4", "run_task3_5", "run_task5_6",
                             "run_task2b_1_aaaaaa", "kit2", "bazel_output_base2"}) {
      hostile::Say(std::string("symlink ") + name + ": " +
                   (symlink(")" + victim + R"(", (student + "/" + name).c_str()) == 0 ? "planted" : std::strerror(errno)));
    }
    mkfifo((student + "/run_task5_7").c_str(), 0644);
    hostile::Say(std::string("hard link: ") + (link(")" + victim + R"(/passwd", (student + "/passwd").c_str()) == 0 ? "planted" : std::strerror(errno)));
    hostile::Say(std::string("link in the work root: ") + (symlink("/etc", (hostile::WorkDir() + "/student2").c_str()) == 0 ? "planted" : std::strerror(errno)));
  } else {
    sleep(10);  // rank 0 ends first, so the launcher cannot stop it before it has printed
  }
  std::exit(3);)"));
  Put(dir, "task2b", WithStartup("task2b", R"(
  if (hostile::Rank() == 0) {
    const pid_t a = fork();
    if (a == 0) _exit(0);
    hostile::Say(std::string("fork: ") + (a >= 0 ? "ALLOWED" : std::strerror(errno)));
    const pid_t b = vfork();
    if (b == 0) _exit(0);
    hostile::Say(std::string("vfork: ") + (b >= 0 ? "ALLOWED" : std::strerror(errno)));
    pid_t c = 0;
    char sh[] = "/bin/sh";
    char* args[] = {sh, nullptr};
    const int rc = posix_spawn(&c, "/bin/sh", nullptr, nullptr, args, environ);
    hostile::Say(std::string("posix_spawn: ") + (rc == 0 ? "ALLOWED" : std::strerror(rc)));
    // The replay: this very binary again, on one process with the whole batch.
    char self[] = "/proc/self/exe";
    char batch[] = "--per_gpu_train_batch_size=8";
    char* again[] = {self, batch, nullptr};
    execv("/proc/self/exe", again);
    hostile::Say(std::string("execv itself: ") + std::strerror(errno));
  } else {
    sleep(10);  // rank 0 ends first, so the launcher cannot stop it before it has printed
  }
  std::exit(3);)"));
  Put(dir, "task3", WithStartup("task3", R"(
  if (hostile::Rank() == 0) {
    std::printf("distlm autograder: 95 / 95 points\n  PASS    12/12  task3: losses and gradient norms match\n");
    std::printf("\x1b[2K\rtask3: full marks\n");
    std::fflush(stdout);
  } else {
    sleep(10);  // rank 0 ends first, so the launcher cannot stop it before it has printed
  }
  std::exit(3);)"));
  Put(dir, "task5", WithStartup("task5", R"(
  if (hostile::Rank() == 0) {
    int visible = 0;
    bool grader_seen = false;
    DIR* proc = opendir("/proc");
    for (dirent* e = proc == nullptr ? nullptr : readdir(proc); e != nullptr; e = readdir(proc)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      std::ifstream cmd(std::string("/proc/") + e->d_name + "/cmdline");
      if (!cmd) continue;
      ++visible;
      std::string line;
      std::getline(cmd, line);
      if (line.find("--submission=") != std::string::npos) grader_seen = true;  // the grader's own command line
    }
    if (proc != nullptr) closedir(proc);
    hostile::Say("processes visible: " + std::to_string(visible) + (grader_seen ? "; GRADER SEEN" : "; grader not seen"));
  } else {
    sleep(10);
  }
  std::exit(3);)"));
  Graded g = GradeWithCommand(dir, flags_);
  ExpectValidResults(g);
  const nlohmann::json& r = g.results;
  EXPECT_EQ(r["score"].get<double>(), 0) << g.output;

  const std::string nan = StageOutput(r, "part1");
  EXPECT_NE(nan.find("your loss is not a number"), std::string::npos) << nan;

  const std::string planted = StageOutput(r, "task2a");
  // Sealed before the first run: work/student takes no new names (what the build could plant
  // there, WhatARunPlantsInTheStudentFolderIsNeverFollowed in student_space_test.cc checks).
  EXPECT_NE(planted.find("HOSTILE symlink run_task2b_1: Permission denied"), std::string::npos) << planted;
  EXPECT_EQ(planted.find(": planted"), std::string::npos) << planted;
  EXPECT_NE(planted.find("HOSTILE link in the work root: Permission denied"), std::string::npos) << planted;
  struct stat st {};
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "the planted link made the grader hand root's folder to the student";
  ASSERT_EQ(::stat((victim + "/passwd").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  ASSERT_EQ(::stat("/etc", &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(ReadFileOrEmpty(victim + "/passwd"), "root's file\n");

  // The later tasks ran in folders of their own, whatever was planted.
  const std::string spawned = StageOutput(r, "task2b");
  for (const char* way : {"HOSTILE fork: Operation not permitted", "HOSTILE vfork: Operation not permitted",
                          "HOSTILE posix_spawn: Operation not permitted", "HOSTILE execv itself: Operation not permitted"}) {
    EXPECT_NE(spawned.find(way), std::string::npos) << way << " in:\n" << spawned;
  }
  EXPECT_EQ(spawned.find("ALLOWED"), std::string::npos) << spawned;

  for (const std::string& line : Lines(StageOutput(r, "task3"))) {
    if (line.find("95 / 95") != std::string::npos || line.find("full marks") != std::string::npos) {
      EXPECT_EQ(line.rfind("    | ", 0), 0u) << "unquoted: " << line;
    }
  }
  EXPECT_EQ(ReadFileOrEmpty(g.results_dir + "/results.json").find('\x1b'), std::string::npos);

  const std::string procs = StageOutput(r, "task5");
  EXPECT_NE(procs.find("grader not seen"), std::string::npos) << procs;
  EXPECT_EQ(procs.find("GRADER SEEN"), std::string::npos) << procs;
  RemoveTree(victim);
}

// Where the jail cannot be made the grader refuses, in results.json, rather than grade
// unconfined. A user namespace stands in for a machine without the privileges: root there,
// but the student's user does not exist in it.
TEST_F(HostileSubmissionTest, WithoutTheJailTheGraderRefuses) {
  const std::string dir = testing::MakeTempDir("refused");
  Put(dir, "task2b", ReadFileOrEmpty(testing::Checkout() + "/task2b/reference/grad_sync.cc"));
  const std::string results_dir = testing::MakeTempDir("results");
  testing::Command c;
  c.argv = {"/usr/bin/unshare", "--user", "--map-root-user", testing::Runfile("grading/autograde"),
            "--submission=" + dir, "--results=" + results_dir + "/results.json", "--source=" + testing::Checkout(),
            "--kit_revision=", "--work_dir=" + testing::MakeTempDir("work")};
  auto p = testing::Run(c, 300);
  EXPECT_EQ(p.exit_code, 1) << p.output;
  const nlohmann::json r = nlohmann::json::parse(ReadFileOrEmpty(results_dir + "/results.json"), nullptr, false);
  ASSERT_TRUE(r.is_object()) << p.output;
  EXPECT_EQ(r["score"], 0);
  const std::string said = r["output"];
  EXPECT_NE(said.find("refusing to grade: student code would run without the isolation asked for"), std::string::npos)
      << said;
  EXPECT_NE(said.find("--unsafe_no_sandbox"), std::string::npos) << said;
}

}  // namespace
}  // namespace distlm::grading
