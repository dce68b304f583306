// Reading submissions: the handout layout, the reference folders as a submission, missing and
// extra files, a zipped folder, and what a hostile zip or directory may hold (path traversal,
// symbolic links, oversized files, a zip that is not one). And the stage table against the tree.
#include "grading/submission.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"
#include "tools/student_kit.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

using ::distlm::testing::ReadFileOrEmpty;
using ::distlm::testing::WriteFileMakingDirs;

// --- a minimal zip writer (stored entries), so tests can make entries no archiver would ----

uint32_t Crc32(const std::string& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

struct ZipEntry {
  std::string name;
  std::string data;
  uint32_t mode = 0100644;  // st_mode: 0120777 makes a symbolic link, 040755 a folder
};

void Put16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v & 0xFF));
  out->push_back(static_cast<char>(v >> 8));
}
void Put32(std::string* out, uint32_t v) {
  Put16(out, static_cast<uint16_t>(v & 0xFFFF));
  Put16(out, static_cast<uint16_t>(v >> 16));
}

void WriteZip(const std::string& path, const std::vector<ZipEntry>& entries) {
  std::string body, central;
  for (const auto& e : entries) {
    const uint32_t offset = static_cast<uint32_t>(body.size()), crc = Crc32(e.data);
    const uint32_t size = static_cast<uint32_t>(e.data.size());
    Put32(&body, 0x04034b50);
    Put16(&body, 20);
    Put16(&body, 0);       // flags
    Put16(&body, 0);       // stored
    Put16(&body, 0);       // time
    Put16(&body, 0x21);    // date: 1980-01-01
    Put32(&body, crc);
    Put32(&body, size);
    Put32(&body, size);
    Put16(&body, static_cast<uint16_t>(e.name.size()));
    Put16(&body, 0);
    body += e.name + e.data;
    Put32(&central, 0x02014b50);
    Put16(&central, (3 << 8) | 20);  // made by Unix: the mode below is meaningful
    Put16(&central, 20);
    Put16(&central, 0);
    Put16(&central, 0);
    Put16(&central, 0);
    Put16(&central, 0x21);
    Put32(&central, crc);
    Put32(&central, size);
    Put32(&central, size);
    Put16(&central, static_cast<uint16_t>(e.name.size()));
    Put16(&central, 0);  // extra
    Put16(&central, 0);  // comment
    Put16(&central, 0);  // disk
    Put16(&central, 0);  // internal attributes
    Put32(&central, e.mode << 16);
    Put32(&central, offset);
    central += e.name;
  }
  std::string end;
  Put32(&end, 0x06054b50);
  Put16(&end, 0);
  Put16(&end, 0);
  Put16(&end, static_cast<uint16_t>(entries.size()));
  Put16(&end, static_cast<uint16_t>(entries.size()));
  Put32(&end, static_cast<uint32_t>(central.size()));
  Put32(&end, static_cast<uint32_t>(body.size()));
  Put16(&end, 0);
  std::ofstream(path, std::ios::binary) << body << central << end;
}

bool AnyContains(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

// The reference folders, copied into the handout's layout (part1/ for part1/).
std::string ReferenceSubmission() {
  std::string dir = testing::MakeTempDir("ref_submission");
  for (const auto& st : stages::All()) {
    for (const auto& f : st.files) {
      WriteFileMakingDirs(dir + "/" + st.id + "/" + f, ReadFileOrEmpty(testing::Runfile(st.id + "/reference/" + f)));
    }
  }
  return dir;
}

TEST(LoadSubmissionTest, TheReferenceFoldersAreAValidSubmission) {
  const std::string dir = ReferenceSubmission();
  Submission s = LoadSubmission(dir, testing::MakeTempDir("work"));
  ASSERT_EQ(s.fatal, "");
  EXPECT_TRUE(s.ignored.empty()) << Joined(s.ignored);
  for (const auto& st : stages::All()) {
    const SubmittedStage& got = s.stages.at(st.id);
    EXPECT_TRUE(got.folder_present) << st.id;
    EXPECT_TRUE(got.missing.empty()) << st.id;
    for (const auto& f : st.files) {
      ASSERT_EQ(got.files.count(f), 1u) << st.id << "/" << f;
      EXPECT_EQ(ReadFileOrEmpty(got.files.at(f)), ReadFileOrEmpty(dir + "/" + st.id + "/" + f)) << "the grader's copy of " << st.id << "/" << f;
    }
  }
}

TEST(LoadSubmissionTest, MissingAndExtraFilesAreReportedNotTaken) {
  const std::string dir = testing::MakeTempDir("sub");
  WriteFileMakingDirs(dir + "/task2a/grad_sync.cc", "// 2a\n");
  WriteFileMakingDirs(dir + "/task2a/notes.txt", "my notes\n");
  WriteFileMakingDirs(dir + "/task2b/student/grad_sync.cc", "// 2b, one folder too deep\n");
  WriteFileMakingDirs(dir + "/README.md", "hello\n");
  WriteFileMakingDirs(dir + "/.DS_Store", "x");
  WriteFileMakingDirs(dir + "/__MACOSX/task2a/._grad_sync.cc", "x");
  Submission s = LoadSubmission(dir, testing::MakeTempDir("work"));
  ASSERT_EQ(s.fatal, "");
  EXPECT_EQ(s.stages.at("task2a").files.size(), 1u);
  EXPECT_TRUE(s.stages.at("task2a").missing.empty());
  EXPECT_EQ(s.stages.at("task2b").missing, std::vector<std::string>{"grad_sync.cc"});
  EXPECT_TRUE(s.stages.at("task2b").folder_present);
  EXPECT_EQ(s.stages.at("task3").missing, (std::vector<std::string>{"bucketed_ddp.cc", "per_parameter_ddp.cc"}));
  EXPECT_FALSE(s.stages.at("part1").folder_present);
  const std::string ignored = Joined(s.ignored);
  EXPECT_TRUE(AnyContains(s.ignored, "task2a/notes.txt: not a student file")) << ignored;
  EXPECT_TRUE(AnyContains(s.ignored, "README.md: not a student file")) << ignored;
  EXPECT_TRUE(AnyContains(s.ignored, "task2b/student/grad_sync.cc: ignored; the files go directly into task2b/ (did "
                                     "you mean task2b/grad_sync.cc?)"))
      << ignored;
  EXPECT_TRUE(AnyContains(s.ignored, "2 hidden or system file(s)")) << ignored;
}

TEST(LoadSubmissionTest, ASymbolicLinkIsNotFollowed) {
  const std::string dir = testing::MakeTempDir("sub");
  const std::string secret = testing::MakeTempDir("secret") + "/solution.cc";
  WriteFileMakingDirs(secret, "// someone else's solution\n");
  fs::create_directories(dir + "/task2a");
  fs::create_symlink(secret, dir + "/task2a/grad_sync.cc");
  const std::string work = testing::MakeTempDir("work");
  Submission s = LoadSubmission(dir, work);
  EXPECT_EQ(s.stages.at("task2a").missing, std::vector<std::string>{"grad_sync.cc"});
  EXPECT_TRUE(AnyContains(s.ignored, "task2a/grad_sync.cc: a symbolic link, not accepted")) << Joined(s.ignored);
  EXPECT_FALSE(fs::exists(work + "/accepted/task2a/grad_sync.cc"));
}

TEST(LoadSubmissionTest, AZippedFolderIsLookedInto) {
  const std::string zip = testing::MakeTempDir("zip") + "/submission.zip";
  // A folder name with the characters unzip treats as wildcards.
  WriteZip(zip, {{"My Sub [v2]*/", "", 040755},
                 {"My Sub [v2]*/task2a/grad_sync.cc", "// 2a from a zip\n"},
                 {"My Sub [v2]*/task2b/grad_sync.cc", "// 2b from a zip\n"},
                 {"__MACOSX/My Sub [v2]*/task2a/._grad_sync.cc", "x"}});
  Submission s = LoadSubmission(zip, testing::MakeTempDir("work"));
  ASSERT_EQ(s.fatal, "");
  EXPECT_TRUE(AnyContains(s.notes, "looked for inside 'My Sub [v2]*/'")) << Joined(s.notes);
  ASSERT_EQ(s.stages.at("task2a").files.count("grad_sync.cc"), 1u) << Joined(s.ignored);
  EXPECT_EQ(ReadFileOrEmpty(s.stages.at("task2a").files.at("grad_sync.cc")), "// 2a from a zip\n");
  EXPECT_EQ(ReadFileOrEmpty(s.stages.at("task2b").files.at("grad_sync.cc")), "// 2b from a zip\n");
  EXPECT_EQ(s.stages.at("task3").missing, (std::vector<std::string>{"bucketed_ddp.cc", "per_parameter_ddp.cc"}));
}

TEST(LoadSubmissionTest, AHostileZipIsReadSafely) {
  const std::string root = testing::MakeTempDir("hostile");
  const std::string zip = root + "/submission.zip";
  WriteZip(zip, {{"../task2a/grad_sync.cc", "// escapes the folder\n"},
                 {"task2a/../../outside.cc", "// escapes too\n"},
                 {"/tmp/absolute.cc", "// absolute\n"},
                 {"task2a/grad_sync.cc", "// the real one\n"},
                 {"task2b/grad_sync.cc", "/etc/passwd", 0120777},
                 {"task3/bucketed_ddp.cc", std::string(kMaxStudentFileBytes + 10, 'x')}});
  const std::string work = root + "/work";
  fs::create_directories(work);
  Submission s = LoadSubmission(zip, work);
  ASSERT_EQ(s.fatal, "");
  const std::string ignored = Joined(s.ignored);
  EXPECT_EQ(ReadFileOrEmpty(s.stages.at("task2a").files.at("grad_sync.cc")), "// the real one\n");
  EXPECT_TRUE(AnyContains(s.ignored, "../task2a/grad_sync.cc: unsafe path")) << ignored;
  EXPECT_TRUE(AnyContains(s.ignored, "task2a/../../outside.cc: unsafe path")) << ignored;
  EXPECT_TRUE(AnyContains(s.ignored, "/tmp/absolute.cc: unsafe path")) << ignored;
  EXPECT_TRUE(AnyContains(s.ignored, "task2b/grad_sync.cc: a symbolic link, not accepted")) << ignored;
  EXPECT_TRUE(AnyContains(s.ignored, "task3/bucketed_ddp.cc: 1048586 bytes, more than the 1048576")) << ignored;
  EXPECT_EQ(s.stages.at("task2b").missing, std::vector<std::string>{"grad_sync.cc"});
  EXPECT_EQ(s.stages.at("task3").missing, (std::vector<std::string>{"bucketed_ddp.cc", "per_parameter_ddp.cc"}));
  // Nothing was written outside the work folder's accepted/ tree.
  std::vector<std::string> written;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) written.push_back(e.path().lexically_relative(root).generic_string());
  }
  for (const auto& w : written) {
    EXPECT_TRUE(w == "submission.zip" || w.rfind("work/accepted/", 0) == 0 || w.rfind("work/zip_", 0) == 0) << w;
  }
  EXPECT_FALSE(fs::exists("/tmp/absolute.cc") && ReadFileOrEmpty("/tmp/absolute.cc") == "// absolute\n");
}

TEST(LoadSubmissionTest, WhatIsNotASubmissionIsOneMessage) {
  const std::string dir = testing::MakeTempDir("notsub");
  Submission missing = LoadSubmission(dir + "/nope", dir);
  EXPECT_EQ(missing.fatal, "the submission " + dir + "/nope does not exist");
  WriteFileMakingDirs(dir + "/essay.txt", "not a zip\n");
  Submission text = LoadSubmission(dir + "/essay.txt", dir);
  EXPECT_EQ(text.fatal, "the submission " + dir + "/essay.txt is neither a directory nor a .zip file");
  WriteFileMakingDirs(dir + "/broken.zip", std::string("PK\x03\x04", 4) + "this is not the rest of a zip");
  Submission broken = LoadSubmission(dir + "/broken.zip", dir);
  EXPECT_NE(broken.fatal.find("cannot read the zip " + dir + "/broken.zip"), std::string::npos) << broken.fatal;
  // Every stage still has its (missing) files listed, so grading can say what was expected.
  EXPECT_EQ(broken.stages.at("task2a").missing, std::vector<std::string>{"grad_sync.cc"});
}

// The checkout these tests were built from: the WORKSPACE runfile links into it.
TEST(StageTableTest, MatchesTheStudentAndReferenceFoldersOfTheTree) {
  const std::string root = testing::Checkout();
  ASSERT_FALSE(root.empty());
  for (const auto& st : stages::All()) {
    for (const std::string side : {"student", "reference"}) {
      std::vector<std::string> names;
      for (const auto& e : fs::directory_iterator(root + "/" + st.id + "/" + side)) {
        names.push_back(e.path().filename().string());
      }
      std::sort(names.begin(), names.end());
      std::vector<std::string> want = st.files;
      std::sort(want.begin(), want.end());
      EXPECT_EQ(names, want) << st.id << "/" << side << "/ and common/stages/stages.h disagree";
    }
    bool student_rule = false;
    for (const auto& s : tools::SplitBuildFile(ReadFileOrEmpty(root + "/" + st.id + "/BUILD"))) {
      for (const auto& n : tools::DefinedNames(s, /*with_reference=*/true)) student_rule = student_rule || n == "student";
    }
    EXPECT_TRUE(student_rule) << st.id << "/BUILD has no :student binary for the grader to build";
  }
  // Every folder with student/ and reference/ side by side is a stage the grader knows.
  for (const auto& e : fs::directory_iterator(root)) {
    if (!fs::is_directory(e.path() / "student") || !fs::is_directory(e.path() / "reference")) continue;
    const std::string name = e.path().filename().string();
    bool known = false;
    for (const auto& st : stages::All()) known = known || st.id == name;
    EXPECT_TRUE(known) << name << " has student/ and reference/ but no row in common/stages/stages.h";
  }
}

}  // namespace
}  // namespace distlm::grading
