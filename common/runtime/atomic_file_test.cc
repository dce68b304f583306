#include "common/runtime/atomic_file.h"

#include <dirent.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "common/runtime/errors.h"

namespace distlm {
namespace {

std::string TmpDir() {
  std::string d = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/atomic";
  MakeDirs(d);
  return d;
}

int CountEntries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (auto* e = readdir(d)) {
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++n;
  }
  closedir(d);
  return n;
}

TEST(AtomicFileTest, ReplacesWholeAndLeavesNoTemporary) {
  std::string dir = TmpDir() + "/replace";
  MakeDirs(dir);
  WriteFileAtomically(dir + "/f.json", "first");
  WriteFileAtomically(dir + "/f.json", std::string(100000, 'x'));
  EXPECT_EQ(ReadFile(dir + "/f.json"), std::string(100000, 'x'));
  EXPECT_EQ(CountEntries(dir), 1);
}

TEST(AtomicFileTest, AppendsLines) {
  std::string p = TmpDir() + "/log.jsonl";
  AppendLineDurably(p, "{\"step\":1}");
  AppendLineDurably(p, "{\"step\":2}");
  EXPECT_EQ(ReadFile(p), "{\"step\":1}\n{\"step\":2}\n");
}

TEST(AtomicFileTest, ErrorsNameThePath) {
  try {
    ReadFile("/nonexistent/dir/file.txt");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/file.txt"), std::string::npos);
  }
  EXPECT_THROW(WriteFileAtomically("/nonexistent/dir/f", "x"), UserError);
  std::string file = TmpDir() + "/plain";
  WriteFileAtomically(file, "x");
  EXPECT_THROW(MakeDirs(file), UserError);
}

}  // namespace
}  // namespace distlm
