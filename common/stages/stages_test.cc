// stages.h (the C++ table: ids, folders, the student's files, grading) against stages.bzl (the
// rows Bazel's lists are made from), read through the stages.tsv it generates.
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/runtime/atomic_file.h"
#include "common/runtime/runfiles.h"
#include "common/stages/stages.h"

namespace distlm::stages {
namespace {

std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, '\t');) out.push_back(field);
  return out;
}

TEST(StagesTest, StagesBzlAndStagesHListTheSameStages) {
  std::stringstream tsv(ReadFile(FindRunfile("common/stages/stages.tsv")));
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(tsv, line);) {
    if (!line.empty()) rows.push_back(Split(line));
  }
  ASSERT_EQ(rows.size(), All().size()) << "common/stages/stages.bzl and stages.h list different numbers of stages";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Stage& s = All()[i];
    const std::vector<std::string>& r = rows[i];
    ASSERT_GE(r.size(), 4u) << "stages.tsv line " << i + 1;
    EXPECT_EQ(r[0], s.id) << "stage " << i + 1 << ": stages.bzl and stages.h disagree on the id (or the order)";
    EXPECT_EQ(r[1], s.package) << s.id << ": the folder";
    EXPECT_EQ(r[2] == "1", s.grading.ranks > 1) << s.id << ": distributed in stages.bzl, ranks in stages.h";
    EXPECT_EQ(std::vector<std::string>(r.begin() + 3, r.end()), s.files) << s.id << ": the student's files";
  }
}

}  // namespace
}  // namespace distlm::stages
