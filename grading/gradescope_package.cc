// bazel run //grading:gradescope_package -- --out=DIR
//
// Writes DIR/autograder.zip, the autograder as Gradescope takes it (docs/instructor.md, "On
// Gradescope"), and leaves its unpacked tree in DIR/autograder:
//   setup.sh, run_autograder   at the root (grading/gradescope/), with the Dockerfile
//   kit/                       the student kit of --source at --kit_revision (no reference code)
//   grader/autograde           the grader, with autograde.runfiles/: the binaries it compares
//                              with (part 1's reference, the mutant stages, the launcher),
//                              compiled; none of their sources
//   grader/libtorch.env        which LibTorch the grader was linked against, for setup.sh and
//                              run_autograder: Debian's (DISTLM_TORCH_WHEEL empty) or PyPI's
//                              `torch` wheel VERSION (DISTLM_TORCH_WHEEL=VERSION; setup.sh installs
//                              it in /opt/distlm and builds the kit against it)
// Package with the LibTorch the image will have: Debian's on Debian 12, or the wheel
// (DISTLM_LIBTORCH=$(tools/torch_wheel.sh 2.11.0 | tail -1) bazel run ...) for any other base.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <libtorch_info.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/runtime/runfiles.h"
#include "common/runtime/user_path.h"
#include "common/stages/stages.h"
#include "grading/stage_grading.h"
#include "tools/student_kit.h"

ABSL_FLAG(std::string, out, "", "the folder to write autograder.zip (and its unpacked tree) into");
ABSL_FLAG(std::string, source, "", "the checkout to make the kit from; default: the workspace of `bazel run`");
ABSL_FLAG(std::string, kit_revision, "HEAD", "the commit of --source the kit is made from; empty: its working tree");

namespace {

namespace fs = std::filesystem;

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The torch wheel VERSION this build's LibTorch came from ("" for Debian's): tools/torch_wheel.sh
// leaves distlm_torch_wheel.txt ("torch==VERSION (...)") beside the wheel's torch/ folder. Any
// other LibTorch is refused: the image would have no way to install the same one.
std::string WheelVersionOfThisBuild() {
  const std::string source = DISTLM_LIBTORCH_SOURCE;
  if (source == "system") return "";
  const fs::path record = fs::path(DISTLM_LIBTORCH_ROOT).parent_path() / "distlm_torch_wheel.txt";
  std::ifstream in(record);
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  const std::string line = text.str();
  if (!in || !std::regex_search(line, m, std::regex(R"(torch==([0-9]+\.[0-9]+(\.[0-9]+)?))"))) {
    throw distlm::UserError(std::string("DISTLM_LIBTORCH=") + DISTLM_LIBTORCH_ROOT +
                            " is not a torch wheel installed by tools/torch_wheel.sh (no " + record.string() +
                            "): the image could not install the LibTorch the grader is linked against; package with"
                            " Debian's LibTorch or DISTLM_LIBTORCH=$(tools/torch_wheel.sh VERSION | tail -1)");
  }
  return m[1];
}

void CopyExecutable(const std::string& from, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  fs::permissions(to, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                          fs::perms::others_read | fs::perms::others_exec);
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage("writes the Gradescope autograder zip: --out=DIR");
  absl::ParseCommandLine(argc, argv);
  const std::string out = distlm::FromUserWorkingDirectory(absl::GetFlag(FLAGS_out));
  if (out.empty()) throw distlm::UserError("--out: give the folder to write autograder.zip into");
  std::string source = distlm::FromUserWorkingDirectory(absl::GetFlag(FLAGS_source));
  if (source.empty()) {
    const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY");
    if (ws == nullptr) throw distlm::UserError("--source: give the checkout (or run this with `bazel run`)");
    source = ws;
  }
  const fs::path root = fs::path(out) / "autograder";
  const fs::path zip = fs::path(out) / "autograder.zip";
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::remove(zip, ec);
  fs::create_directories(root);

  distlm::tools::KitOptions kit;
  kit.source_root = source;
  kit.out_dir = (root / "kit").string();
  kit.revision = absl::GetFlag(FLAGS_kit_revision);
  distlm::tools::KitReport report = distlm::tools::MakeStudentKit(kit);
  for (const auto& w : report.warnings) std::fprintf(stderr, "gradescope_package: kit: %s\n", w.c_str());

  // The grader and what it runs, by name (nothing else of this binary's runfiles goes in):
  // part 1's reference for the expected trace, the mutant stages for known mistakes, the
  // launcher, the ViT's image writer (--model_type=vit), and the built-in data those read.
  // Links are followed: files only.
  const fs::path to = root / "grader" / "autograde.runfiles" / "distlm";
  CopyExecutable(distlm::FindRunfile("grading/autograde"), root / "grader" / "autograde");
  std::vector<std::string> binaries = {"part1/reference", "grading/mutant_stage", "tools/launch",
                                       "common/vision/make_sample_cifar10"};
  for (const auto& st : distlm::stages::All()) {  // the stages' own mutants (grading/stage_grading.h)
    const std::string own = distlm::grading::GradingOf(st.id).MutantBinary();
    if (!own.empty()) binaries.push_back(own);
  }
  for (const std::string& binary : binaries) {
    fs::create_directories((to / binary).parent_path());
    CopyExecutable(distlm::FindRunfile(binary), to / binary);
  }
  for (const char* data : {"common/testdata/vocab.txt", "common/testdata/rte"}) {
    fs::create_directories((to / data).parent_path());
    fs::copy(distlm::FindRunfile(data), to / data, fs::copy_options::recursive);
  }
  for (const char* script : {"setup.sh", "run_autograder"}) {
    CopyExecutable(distlm::FindRunfile(std::string("grading/gradescope/") + script), root / script);
  }
  // The image definition (manual Docker configuration, local grading): Gradescope ignores it.
  fs::copy_file(distlm::FindRunfile("grading/gradescope/Dockerfile"), root / "Dockerfile",
                fs::copy_options::overwrite_existing);

  const std::string wheel = WheelVersionOfThisBuild();
  distlm::WriteFileAtomically((root / "grader" / "libtorch.env").string(),
                              "# Written by //grading:gradescope_package: the LibTorch grader/ is linked against.\n"
                              "DISTLM_TORCH_WHEEL=" + wheel + "\n");

  const std::string cmd = "cd " + Quote(root.string()) + " && /usr/bin/zip -qr " + Quote(zip.string()) + " .";
  if (std::system(cmd.c_str()) != 0) throw distlm::UserError("zip failed: " + cmd);
  std::printf("gradescope_package: %s (%s: %zu kit files, the grader and its binaries)\n", zip.string().c_str(),
              root.string().c_str(), report.copied.size());
  std::printf("gradescope_package: LibTorch %s\n",
              wheel.empty() ? "Debian's (the image: Debian 12)" : ("torch wheel " + wheel + " (setup.sh installs it)").c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return distlm::RunMain([&] { return Main(argc, argv); });
}
