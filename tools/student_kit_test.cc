// The student kit: BUILD-file statements, what is left out and removed on small trees, the
// kit's refusal to write a kit that fails its checks, and the real kit of this checkout read
// back file by file.
#include "tools/student_kit.h"

#include <stdlib.h>

#include <cctype>
#include <filesystem>
#include <map>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "common/runtime/errors.h"
#include "common/stages/stages.h"
#include "common/testing/subprocess.h"

namespace distlm::tools {
namespace {

namespace fs = std::filesystem;

using ::distlm::testing::ReadFileOrEmpty;
using ::distlm::testing::WriteFileMakingDirs;

std::set<std::string> FilesUnder(const std::string& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) out.insert(e.path().lexically_relative(root).generic_string());
  }
  return out;
}


// The lines of C++ that carry a solution's meaning: comments, blanks and whitespace dropped,
// namespace qualifiers (train::, distlm::) dropped, and lines that say nothing on their own
// (braces, includes, namespaces, anything under 12 characters) skipped.
std::vector<std::string> CodeLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (auto c = line.find("//"); c != std::string::npos) line.erase(c);
    std::string n;
    for (char ch : line) {
      if (!std::isspace(static_cast<unsigned char>(ch))) n += ch;
    }
    for (size_t q; (q = n.find("::")) != std::string::npos;) {
      size_t b = q;
      while (b > 0 && (std::isalnum(static_cast<unsigned char>(n[b - 1])) || n[b - 1] == '_')) --b;
      n.erase(b, q + 2 - b);
    }
    if (n.size() < 12 || n.rfind("#include", 0) == 0 || n.rfind("namespace", 0) == 0) continue;
    out.push_back(n);
  }
  return out;
}

// Two consecutive code lines of every file under a folder named reference: a kit file holding
// any such pair carries a piece of a solution, verbatim or re-indented.
std::map<std::string, std::string> ReferenceLinePairs(const std::string& root) {
  std::map<std::string, std::string> pairs;  // "line1\nline2" -> reference file
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name == ".git" || name.rfind("bazel-", 0) == 0)) {
      it.disable_recursion_pending();
      continue;
    }
    const std::string rel = it->path().lexically_relative(root).generic_string();
    if (!it->is_regular_file() || rel.find("/reference/") == std::string::npos) continue;
    // Solutions only: a reference folder's own tests share their fixtures with the kit's.
    if (rel.size() > 8 && rel.compare(rel.size() - 8, 8, "_test.cc") == 0) continue;
    if (rel.rfind("grading/", 0) == 0) continue;
    const auto lines = CodeLines(ReadFileOrEmpty(it->path().string()));
    for (size_t i = 0; i + 1 < lines.size(); ++i) pairs.emplace(lines[i] + "\n" + lines[i + 1], rel);
  }
  return pairs;
}

TEST(SplitBuildFileTest, StatementsNamesStringsAndRoundTrip) {
  const std::string text =
      "package(default_visibility = [\"//visibility:public\"])\n"
      "\n"
      "# A free comment.\n"
      "\n"
      "# Attached to the rule below.\n"
      "cc_library(\n"
      "    name = \"lib\",  # a trailing comment with a ) bracket\n"
      "    srcs = [\"a.cc\", 'b(.cc'],\n"
      "    copts = [\"\"\"x\n"
      "y)\"\"\"],\n"
      "    deps = select({\"//conditions:default\": [\":dep\"]}),\n"
      ")\n"
      "exports_files([\"main.cc\"])\n";
  auto st = SplitBuildFile(text);
  std::string joined;
  for (const auto& s : st) joined += s.text;
  EXPECT_EQ(joined, text);
  ASSERT_EQ(st.size(), 4u);
  EXPECT_FALSE(st[0].is_comment_or_blank);
  EXPECT_TRUE(st[1].is_comment_or_blank);
  EXPECT_EQ(st[1].text, "\n# A free comment.\n\n");
  EXPECT_EQ(st[2].name, "lib");
  EXPECT_EQ(st[2].text.rfind("# Attached to the rule below.\ncc_library(", 0), 0u);
  EXPECT_EQ(st[2].strings, (std::vector<std::string>{"lib", "a.cc", "b(.cc", "x\ny)", "//conditions:default", ":dep"}));
  EXPECT_EQ(st[3].name, "");
  EXPECT_EQ(st[3].strings, std::vector<std::string>{"main.cc"});
}

TEST(IsPrivatePathTest, ReferenceFoldersAndTheGrader) {
  EXPECT_TRUE(IsPrivatePath("task2a/reference/grad_sync.cc"));
  EXPECT_TRUE(IsPrivatePath("a/b/reference/c/d.cc"));
  EXPECT_TRUE(IsPrivatePath("grading/BUILD"));
  EXPECT_TRUE(IsPrivatePath("task5/grading/mutant_stage.cc"));  // a stage's own grading
  EXPECT_FALSE(IsPrivatePath("task2a/student/grad_sync.cc"));
  EXPECT_FALSE(IsPrivatePath("docs/reference"));  // a file, not a folder
  EXPECT_FALSE(IsPrivatePath("common/glue/reference_parity_test.cc"));
  EXPECT_TRUE(IsPrivatePath("docs/instructor.md"));  // lists the grader's mutants
  EXPECT_TRUE(IsPrivatePath("README.md"));           // the product page, grader and all
  EXPECT_FALSE(IsPrivatePath("docs/handout/README.md"));
  EXPECT_TRUE(IsPrivatePath("docs/architecture.md"));  // the references' design
  EXPECT_TRUE(IsPrivatePath("docs/design/task7.md"));
  EXPECT_FALSE(IsPrivatePath("docs/designs.md"));
  EXPECT_FALSE(IsPrivatePath("docs/handout/part1.md"));
  EXPECT_FALSE(IsPrivatePath("docs/handout/faq.md"));
}

// A stage laid out as the course's are, and a package using the grader.
std::string MakeTree() {
  std::string src = testing::MakeTempDir("kit_src");
  WriteFileMakingDirs(src + "/WORKSPACE", "workspace(name = \"x\")\n");
  WriteFileMakingDirs(src + "/BUILD", "");
  WriteFileMakingDirs(src + "/README.md", "run `bazel run //stage:reference`\n");
  WriteFileMakingDirs(src + "/stage/main.cc", "int main() {}\n");
  WriteFileMakingDirs(src + "/stage/api.h", "void F();\n");
  WriteFileMakingDirs(src + "/stage/reference/impl.cc", "void F() { /* the solution */ }\n");
  WriteFileMakingDirs(src + "/stage/student/impl.cc", "void F() { /* TODO(student) */ }\n");
  WriteFileMakingDirs(src + "/stage/reference_test.cc", "// runs :reference\n");
  WriteFileMakingDirs(src + "/stage/guide.md", "what `bazel run //stage:reference` prints\n");
  WriteFileMakingDirs(src + "/stage/BUILD",
        "cc_library(\n    name = \"api\",\n    hdrs = [\"api.h\"],\n)\n\n"
        "cc_library(\n    name = \"reference_impl\",\n    srcs = [\"reference/impl.cc\"],\n    deps = [\":api\"],\n)\n\n"
        "# The solution binary.\n"
        "cc_binary(\n    name = \"reference\",\n    srcs = [\"main.cc\"],\n    deps = [\":reference_impl\"],\n)\n\n"
        "cc_binary(\n    name = \"student\",\n    srcs = [\"main.cc\", \"student/impl.cc\"],\n    deps = [\":api\"],\n)\n\n"
        "cc_test(\n    name = \"reference_test\",\n    srcs = [\"reference_test.cc\"],\n    data = [\":reference\", \"guide.md\"],\n)\n");
  WriteFileMakingDirs(src + "/grading/BUILD", "cc_library(name = \"judge\")\n");
  WriteFileMakingDirs(src + "/other/BUILD",
        "cc_test(name = \"uses_judge\", deps = [\"//grading:judge\"])\n"
        "cc_library(name = \"fine\", deps = [\"//stage:api\", \"@libtorch\"])\n");
  return src;
}

TEST(MakeStudentKitTest, LeavesOutSolutionsTheGraderAndWhatOnlyTheyUse) {
  std::string src = MakeTree();
  std::string out = testing::MakeTempDir("kit_out") + "/kit";
  KitReport r = MakeStudentKit({src, out});
  auto files = FilesUnder(out);
  EXPECT_EQ(files, (std::set<std::string>{"WORKSPACE", "BUILD", "README.md", "stage/BUILD", "stage/main.cc",
                                          "stage/api.h", "stage/student/impl.cc", "stage/guide.md",
                                          "other/BUILD"}));
  const std::string readme = ReadFileOrEmpty(out + "/README.md");
  EXPECT_NE(readme.find("docs/handout/README.md"), std::string::npos) << "the kit's README is the student's: " << readme;
  const std::string stage_build = ReadFileOrEmpty(out + "/stage/BUILD");
  EXPECT_EQ(stage_build.find("reference"), std::string::npos) << stage_build;
  EXPECT_EQ(stage_build.find("The solution binary"), std::string::npos) << "its comment goes with the rule";
  EXPECT_NE(stage_build.find("name = \"student\""), std::string::npos);
  EXPECT_NE(stage_build.find("name = \"api\""), std::string::npos);
  const std::string other_build = ReadFileOrEmpty(out + "/other/BUILD");
  EXPECT_EQ(other_build, "cc_library(name = \"fine\", deps = [\"//stage:api\", \"@libtorch\"])\n");
  EXPECT_EQ(r.removed_rules.size(), 4u);  // reference_impl, reference, reference_test, uses_judge
  bool warned = false;
  for (const auto& w : r.warnings) warned = warned || w == "stage/guide.md mentions //stage:reference, which the kit does not have";
  EXPECT_TRUE(warned);
  // The same folder again: refused, not mixed.
  try {
    MakeStudentKit({src, out});
    ADD_FAILURE() << "a second kit into a non-empty folder was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("exists and is not empty"), std::string::npos) << e.what();
  }
}

TEST(MakeStudentKitTest, RemovesStatementsThatCallAReferenceHelper) {
  std::string src = MakeTree();
  // As //common/stages:stages.bzl's helpers: the reference list names no reference target
  // in the BUILD file itself, so only the call gives it away.
  WriteFileMakingDirs(src + "/lists/lists.bzl", "def stage_labels(t):\n    return []\n");
  WriteFileMakingDirs(src + "/lists/BUILD", "");
  WriteFileMakingDirs(src + "/bench/BUILD",
        "load(\"//lists:lists.bzl\", \"stage_labels\", \"stage_reference_labels\")\n\n"
        "sh_test(\n    name = \"runs_references\",\n    data = [\"//stage:api\"] + stage_reference_labels (),\n)\n\n"
        "sh_test(\n    name = \"runs_students\",\n    data = stage_labels(\"student\"),\n)\n\n"
        "sh_test(\n    name = \"not_a_call\",\n    data = [\"//stage:api\"],\n    tags = [\"my_stage_reference_labels(\"],\n)\n");
  std::string out = testing::MakeTempDir("kit_out") + "/kit";
  KitReport r = MakeStudentKit({src, out});
  const std::string bench = ReadFileOrEmpty(out + "/bench/BUILD");
  EXPECT_EQ(bench.find("runs_references"), std::string::npos) << bench;
  EXPECT_NE(bench.find("runs_students"), std::string::npos) << bench;
  EXPECT_NE(bench.find("not_a_call"), std::string::npos) << "a longer name is not the helper:\n" << bench;
  EXPECT_NE(bench.find("load(\"//lists:lists.bzl\""), std::string::npos) << "the load stays:\n" << bench;
  bool reported = false;
  for (const auto& rule : r.removed_rules) {
    reported = reported || rule == "//bench:runs_references (calls stage_reference_labels(), which lists the stages' "
                                   "reference solutions)";
  }
  EXPECT_TRUE(reported) << "removed rules: " << r.removed_rules.size();
}

// A stage whose targets come from distlm_stage(): the BUILD file names none of them, so the kit
// knows them from the macro's lists (tools/build_file.h): the student's resolve, a rule naming a
// reference one goes, and a document naming one is warned about.
TEST(MakeStudentKitTest, KnowsTheTargetsOfTheStageMacro) {
  std::string src = MakeTree();
  WriteFileMakingDirs(src + "/lists/lists.bzl", "def distlm_stage(api, stage):\n    pass\n");
  WriteFileMakingDirs(src + "/lists/BUILD", "");
  WriteFileMakingDirs(src + "/macro_stage/reference/impl.cc", "void G() { /* the other solution */ }\n");
  WriteFileMakingDirs(src + "/macro_stage/student/impl.cc", "void G() { /* TODO(student) again */ }\n");
  WriteFileMakingDirs(src + "/macro_stage/guide.md", "bazel run //macro_stage:reference_impl\n");
  WriteFileMakingDirs(src + "/macro_stage/BUILD",
        "load(\"//lists:lists.bzl\", \"distlm_stage\")\n\n"
        "distlm_stage(\n    api = \"//stage:api\",\n    stage = \"//stage:api\",\n)\n\n"
        "sh_test(\n    name = \"compares\",\n    data = [\":student\", \":reference_student_test\"],\n)\n\n"
        "sh_test(\n    name = \"runs_student\",\n    data = [\":student\", \":student_test\", \":student_impl\"],\n)\n");
  std::string out = testing::MakeTempDir("kit_out") + "/kit";
  KitReport r = MakeStudentKit({src, out});
  const std::string build = ReadFileOrEmpty(out + "/macro_stage/BUILD");
  EXPECT_NE(build.find("distlm_stage("), std::string::npos) << build;
  EXPECT_NE(build.find("runs_student"), std::string::npos) << "the macro's student targets resolve:\n" << build;
  EXPECT_EQ(build.find("compares"), std::string::npos) << "it names a target made from reference/:\n" << build;
  EXPECT_FALSE(fs::exists(out + "/macro_stage/reference"));
  bool removed = false, warned = false;
  for (const auto& rule : r.removed_rules) {
    removed = removed || rule == "//macro_stage:compares (depends on :reference_student_test, removed)";
  }
  for (const auto& w : r.warnings) {
    warned = warned || w == "macro_stage/guide.md mentions //macro_stage:reference_impl, which the kit does not have";
  }
  EXPECT_TRUE(removed) << "removed rules: " << r.removed_rules.size();
  EXPECT_TRUE(warned) << "warnings: " << r.warnings.size();
}

TEST(MakeStudentKitTest, RefusesASolutionCopiedUnderAnotherName) {
  std::string src = MakeTree();
  WriteFileMakingDirs(src + "/stage/notes.txt", "void F() { /* the solution */ }\n");
  try {
    MakeStudentKit({src, testing::MakeTempDir("kit_out") + "/kit"});
    ADD_FAILURE() << "a copy of the reference went into the kit";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("stage/notes.txt has the same content as stage/reference/impl.cc"),
              std::string::npos)
        << e.what();
  }
}

TEST(MakeStudentKitTest, RefusesALabelThatResolvesToNothing) {
  std::string src = MakeTree();
  WriteFileMakingDirs(src + "/other/BUILD", "cc_library(name = \"x\", deps = [\"//stage:no_such_rule\"])\n");
  try {
    MakeStudentKit({src, testing::MakeTempDir("kit_out") + "/kit"});
    ADD_FAILURE() << "a kit with a dangling label was written";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("other/BUILD: //stage:no_such_rule names nothing the kit has"),
              std::string::npos)
        << e.what();
  }
}

TEST(MakeStudentKitTest, RefusesALabelOfAPackageThatIsNotThere) {
  std::string src = MakeTree();
  WriteFileMakingDirs(src + "/other/BUILD", "cc_library(name = \"x\", deps = [\"//not/committed:lib\"])\n");
  try {
    MakeStudentKit({src, testing::MakeTempDir("kit_out") + "/kit"});
    ADD_FAILURE() << "a kit naming a missing package was written";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("other/BUILD: //not/committed:lib names a package the kit does not have"),
              std::string::npos)
        << e.what();
  }
}

TEST(MakeStudentKitTest, BadArgumentsAreOneLineErrors) {
  EXPECT_THROW(MakeStudentKit({"/nonexistent/checkout", testing::MakeTempDir("kit_out") + "/kit"}), UserError);
  std::string src = MakeTree();
  EXPECT_THROW(MakeStudentKit({src, src + "/inside"}), UserError);
  EXPECT_THROW(MakeStudentKit({src, ""}), UserError);
}

class RealKitTest : public ::testing::TestWithParam<std::string> {};

// From the last commit (what a release is) and from the working tree (what the grader may use
// while the course is being written).
INSTANTIATE_TEST_SUITE_P(Revisions, RealKitTest, ::testing::Values("HEAD", ""),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.empty() ? std::string("WorkingTree") : info.param;
                         });

TEST_P(RealKitTest, NoReferenceSourceAndEveryStubIsThere) {
  const std::string root = testing::Checkout();
  ASSERT_FALSE(root.empty());
  if (!fs::exists(root + "/task2a/reference")) {
    GTEST_SKIP() << "SKIPPED: " << root << " has no reference solutions (it is a student kit): nothing to leave out";
  }
  const std::string out = testing::MakeTempDir("real_kit") + "/kit";
  KitReport r = MakeStudentKit({root, out, GetParam()});
  auto kit = FilesUnder(out);
  ASSERT_GT(kit.size(), 50u);

  // Read independently of the tool: every file below a folder named reference, by walking.
  std::set<std::string> reference_contents;
  size_t reference_files = 0, stage_folders = 0;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name == ".git" || name.rfind("bazel-", 0) == 0)) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory() && name == "reference" && fs::exists(it->path().parent_path() / "student")) {
      ++stage_folders;
      for (const auto& f : fs::directory_iterator(it->path())) {
        reference_contents.insert(ReadFileOrEmpty(f.path().string()));
        ++reference_files;
        // Its student counterpart is in the kit, and is not the solution.
        const std::string rel = fs::path(f.path()).lexically_relative(root).generic_string();
        const std::string student = rel.substr(0, rel.find("/reference/")) + "/student/" + f.path().filename().string();
        EXPECT_EQ(kit.count(student), 1u) << student;
      }
    }
  }
  EXPECT_GE(stage_folders, 5u) << "part1, task2a, task2b, task3, task5 at least";
  // The instructor guide lists the grader's mutants and how it names each mistake.
  EXPECT_EQ(kit.count("docs/instructor.md"), 0u) << "the instructor guide is in the kit";
  EXPECT_EQ(kit.count("docs/handout/part1.md"), 1u);
  for (const auto& f : kit) {
    EXPECT_EQ(f.find("reference/"), std::string::npos) << f;
    EXPECT_EQ(f.find("grading/"), std::string::npos) << f << ": the grader's, or a stage's own grading";
    EXPECT_EQ(reference_contents.count(ReadFileOrEmpty(out + "/" + f)), 0u) << f << " equals a reference file";
  }
  for (const auto& row : stages::All()) {
    const std::string& stage = row.id;
    const std::string build = ReadFileOrEmpty(out + "/" + stage + "/BUILD");
    bool student = false;
    for (const auto& st : SplitBuildFile(build)) {
      for (const auto& n : DefinedNames(st, /*with_reference=*/false)) student = student || n == "student";
      for (const auto& s : st.strings) {
        EXPECT_EQ(s.find("reference"), std::string::npos) << stage << "/BUILD still names " << s;
      }
    }
    EXPECT_TRUE(student) << stage << "/BUILD has no :student binary:\n" << build;
  }
  // No piece of a solution anywhere else in the kit (a student's own stub shares only
  // signatures with its reference, and is left to the tests that run it).
  const auto pairs = ReferenceLinePairs(root);
  EXPECT_GT(pairs.size(), 20u);
  for (const auto& f : kit) {
    if (f.find("/student/") != std::string::npos) continue;
    const auto lines = CodeLines(ReadFileOrEmpty(out + "/" + f));
    for (size_t i = 0; i + 1 < lines.size(); ++i) {
      auto hit = pairs.find(lines[i] + "\n" + lines[i + 1]);
      if (hit != pairs.end()) {
        ADD_FAILURE() << f << " carries two lines of " << hit->second << ": \n  " << lines[i] << "\n  " << lines[i + 1];
        break;
      }
    }
  }
  // The handout is what students follow: every target it names must be in their kit. Checked
  // on the working tree, which is what the next commit releases (HEAD may predate a fix).
  if (GetParam().empty()) {
    for (const auto& w : r.warnings) {
      EXPECT_NE(w.rfind("docs/handout/", 0), 0u) << "the handout names a target the student kit lacks: " << w;
    }
  }
  std::printf("kit: %zu files, %zu left out, %zu rules removed, %zu reference files checked against it\n",
              r.copied.size(), r.left_out.size(), r.removed_rules.size(), reference_files);
  for (const auto& w : r.warnings) std::printf("note: %s\n", w.c_str());
}

}  // namespace
}  // namespace distlm::tools
