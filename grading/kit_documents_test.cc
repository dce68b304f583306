// The student kit's documents describe no reference solution and name none of the grader's
// mutants: a kit made from this checkout, every Markdown file in it read for a path into a
// stage's reference folder, a Bazel label of a reference target, and the name of any mistake the
// grader runs to recognise a wrong trace (grading/mutant_stage's, and each stage's own).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "common/testing/subprocess.h"
#include "grading/grader_runs.h"
#include "grading/stage_grading.h"
#include "tools/student_kit.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

// Mistake names that are also the name of what the student builds (DDP's no_sync is task 3's
// API), so a document may say them.
const std::set<std::string> kAlsoApiNames = {"no_sync"};

std::set<std::string> MutantNames() {
  std::set<std::string> names(DataParallelMistakes().begin(), DataParallelMistakes().end());
  for (const auto& row : stages::All()) {
    const StageGrading& g = GradingOf(row.id);
    for (const auto& m : g.OwnMistakes()) names.insert(m);
    if (!g.ReferenceMutation().empty()) names.insert(g.ReferenceMutation());
  }
  for (const auto& n : kAlsoApiNames) names.erase(n);
  return names;
}

TEST(KitDocumentsTest, NameNoReferenceAndNoMutant) {
  const std::string root = testing::Checkout();
  ASSERT_FALSE(root.empty());
  if (!fs::exists(root + "/task2a/reference")) {
    GTEST_SKIP() << "SKIPPED: " << root << " is a student kit: there is no reference to leave out";
  }
  const std::string out = testing::MakeTempDir("kit_documents") + "/kit";
  tools::MakeStudentKit({root, out, ""});
  const std::set<std::string> mutants = MutantNames();
  ASSERT_GE(mutants.size(), 10u) << "the grader's mistakes were not found";
  // A file in a reference folder (part1/reference/train_step.cc) or a reference target
  // (//part1:reference, :reference_student_test is the kit's own test and stays).
  const std::regex reference_path(R"((^|[^A-Za-z0-9_])reference/[A-Za-z0-9_]+\.(cc|h)\b)");
  const std::regex reference_label(R"(//[A-Za-z0-9_/]*:reference\b(?!_))");
  size_t documents = 0;
  for (const auto& entry : fs::recursive_directory_iterator(out)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".md") continue;
    ++documents;
    const std::string rel = fs::relative(entry.path(), out).generic_string();
    const std::string text = testing::ReadFileOrEmpty(entry.path().string());
    std::smatch m;
    if (std::regex_search(text, m, reference_path)) ADD_FAILURE() << rel << " names a reference file: " << m.str();
    if (std::regex_search(text, m, reference_label)) ADD_FAILURE() << rel << " names a reference target: " << m.str();
    for (const auto& name : mutants) {
      const std::regex word("(^|[^A-Za-z0-9_])" + name + "([^A-Za-z0-9_]|$)");
      if (std::regex_search(text, word)) ADD_FAILURE() << rel << " names the grader's mutant " << name;
    }
  }
  EXPECT_GE(documents, 9u) << "the handout's parts and its README at least";
  EXPECT_NE(testing::ReadFileOrEmpty(out + "/README.md").find("docs/handout/README.md"), std::string::npos)
      << "the kit's README is the student's";
}

}  // namespace
}  // namespace distlm::grading
