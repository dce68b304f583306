// autograde: grade one submission and write Gradescope's results.json.
//
//   bazel run //grading:autograde -- --submission=PATH --results=FILE
//
// PATH is a directory or a .zip in the handout's layout (task2a/grad_sync.cc, ...; see
// grading/README.md). The submission is built on a fresh student kit made from this workspace
// (or --kit), each task runs on --ranks local ranks under time and memory limits, and the
// losses are compared with the grader's own single-node run. A readable summary goes to
// stdout, progress to stderr. Exit 0 once graded (whatever the score), 1 when the grader
// itself failed (results.json then says so), 2 for bad flags.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/runtime/user_path.h"
#include "grading/autograder.h"
#include "grading/time_ledger.h"

ABSL_FLAG(std::string, submission, "", "the submission: a directory or a .zip in the handout's layout");
ABSL_FLAG(std::string, results, "", "where to write Gradescope's results.json");
ABSL_FLAG(std::string, source, "",
          "the checkout to make the student kit from; default: the workspace of `bazel run`");
ABSL_FLAG(std::string, kit, "", "a ready student kit to copy instead of making one from --source");
ABSL_FLAG(std::string, kit_revision, "HEAD",
          "the commit of --source the kit is made from; empty: its working tree's tracked files");
ABSL_FLAG(std::string, bazel, "/usr/bin/bazel", "the bazel binary that builds the kit");
ABSL_FLAG(std::string, model_type, "bert",
          "what every run trains: bert (the tiny built-in BERT on the built-in RTE sample) or vit (the tiny ViT on "
          "CIFAR-10-format images the grader writes); the same tests and points");
ABSL_FLAG(uint64_t, seed, 0,
          "the seed of every run (model initialisation, data order); 0 (the default) draws a new secret one for "
          "each grading, so that no submission can know the numbers a correct run logs");
ABSL_FLAG(int, ranks, 4, "ranks each distributed task runs on (must divide the total batch of 8)");
ABSL_FLAG(double, run_timeout_s, 120, "seconds each run may take, start to end");
ABSL_FLAG(double, build_timeout_s, 600,
          "seconds the submission's build may take (all tasks' files at once, jailed; the grader's own build of the "
          "clean kit before it may take 1800)");
ABSL_FLAG(double, memory_limit_gib, 4, "address space each process of a run may use, GiB");
ABSL_FLAG(bool, isolate_network, true,
          "with --unsafe_no_sandbox, as root: runs still get a network namespace with loopback only");
ABSL_FLAG(std::string, sandbox, "full",
          "how student code is confined (grading/README.md, 'Sandbox'): full = its own user and mount, IPC "
          "and network namespaces (needs root with CAP_SYS_ADMIN); user = its own user only (root in a "
          "container without CAP_SYS_ADMIN). The grader refuses to grade when the level cannot be had");
ABSL_FLAG(bool, unsafe_no_sandbox, false,
          "run student code as the grader's own user, unconfined: for grading your own code on your machine");
ABSL_FLAG(std::string, disk_cache, "",
          "the Bazel disk cache the kit was built with, shared (read-only in a jail) with the submission's "
          "build; default: ~/.cache/distlm/bazel-disk");
ABSL_FLAG(double, disk_limit_gib, 4, "disk space student code (its build and runs) may fill, GiB");
ABSL_FLAG(int64_t, disk_limit_files, 200000, "files and folders student code (its build and runs) may make");
ABSL_FLAG(double, build_memory_limit_gib, 16,
          "address space each process of the submission's build may use (Bazel's JVM, the compiler), GiB");
ABSL_FLAG(bool, recognise_mistakes, true,
          "when a trace is wrong, run the known mistakes to name the one it matches");
ABSL_FLAG(bool, time_overlap, true,
          "judge task 3's overlap by timing the submission against the grader's own runs on a limited link; "
          "false credits it as not judged (a host whose clock says nothing, or a check of everything else)");
ABSL_FLAG(std::string, work_dir, "", "where to put the work folder; default: $TMPDIR or /tmp");
ABSL_FLAG(bool, keep_work, false, "keep the work folder (kit, builds, run outputs) for inspection");
ABSL_FLAG(std::string, prebuilt, "",
          "test seam: STAGE=BINARY[,STAGE=BINARY...] runs these binaries instead of building the stage");
ABSL_FLAG(std::string, prebuilt_flags, "",
          "test seam: STAGE=FLAG[,STAGE=FLAG...] adds FLAG to that prebuilt stage's runs "
          "(e.g. task2b=--mutation=no_sync)");

namespace {

using distlm::UserError;

// The one grading this process does: its start, and where its time went.
double SecondsSinceStart() {
  static const auto started = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}
distlm::grading::TimeLedger& Ledger() {
  static distlm::grading::TimeLedger ledger;
  return ledger;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The grader's configuration from the flags; `submission` and `results` are hidden from
// student code.
distlm::grading::GraderConfig ConfigFromFlags(const std::string& submission, const std::string& results) {
  distlm::grading::GraderConfig config;
  config.source_root = distlm::FromUserWorkingDirectory(absl::GetFlag(FLAGS_source));
  if (config.source_root.empty()) {
    if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY"); ws != nullptr) config.source_root = ws;
  }
  config.kit_dir = distlm::FromUserWorkingDirectory(absl::GetFlag(FLAGS_kit));
  config.kit_revision = absl::GetFlag(FLAGS_kit_revision);
  config.bazel = absl::GetFlag(FLAGS_bazel);
  config.model_type = absl::GetFlag(FLAGS_model_type);
  config.ranks = absl::GetFlag(FLAGS_ranks);
  config.seed = absl::GetFlag(FLAGS_seed);
  config.run_timeout_s = absl::GetFlag(FLAGS_run_timeout_s);
  config.build_timeout_s = absl::GetFlag(FLAGS_build_timeout_s);
  const double gib = absl::GetFlag(FLAGS_memory_limit_gib);
  if (!(gib > 0)) throw UserError("--memory_limit_gib must be positive");
  if (!(config.run_timeout_s > 0)) throw UserError("--run_timeout_s must be positive");
  config.memory_limit_bytes = static_cast<int64_t>(gib * (1 << 30));
  config.isolate_network = absl::GetFlag(FLAGS_isolate_network);
  const std::string sandbox = absl::GetFlag(FLAGS_sandbox);
  if (sandbox != "full" && sandbox != "user") throw UserError("--sandbox must be full or user, not '" + sandbox + "'");
  config.isolation = absl::GetFlag(FLAGS_unsafe_no_sandbox) ? distlm::grading::Isolation::kNone
                     : sandbox == "full"                   ? distlm::grading::Isolation::kFull
                                                           : distlm::grading::Isolation::kUser;
  const double disk_gib = absl::GetFlag(FLAGS_disk_limit_gib);
  if (!(disk_gib > 0)) throw UserError("--disk_limit_gib must be positive");
  config.disk_limit_bytes = static_cast<int64_t>(disk_gib * (1 << 30));
  config.disk_limit_inodes = absl::GetFlag(FLAGS_disk_limit_files);
  if (config.disk_limit_inodes <= 0) throw UserError("--disk_limit_files must be positive");
  const double build_gib = absl::GetFlag(FLAGS_build_memory_limit_gib);
  if (!(build_gib > 0)) throw UserError("--build_memory_limit_gib must be positive");
  config.build_memory_limit_bytes = static_cast<int64_t>(build_gib * (1 << 30));
  config.disk_cache = distlm::FromUserWorkingDirectory(absl::GetFlag(FLAGS_disk_cache));
  // Out of student code's sight besides the grader's own files: where the results go and the
  // submission as it was handed in.
  // Gradescope's submission_metadata.json too (the student's name, email, earlier scores).
  config.hidden_paths = {std::filesystem::path(results).parent_path().string(), submission,
                         "/autograder/submission_metadata.json"};
  config.recognise_mistakes = absl::GetFlag(FLAGS_recognise_mistakes);
  config.work_root = distlm::FromUserWorkingDirectory(absl::GetFlag(FLAGS_work_dir));
  config.keep_work = absl::GetFlag(FLAGS_keep_work);
  // Each line with the seconds since the grading began, and into the ledger printed at the end.
  config.progress = [](const std::string& line) {
    const double s = SecondsSinceStart();
    Ledger().Add(line, s);
    std::fprintf(stderr, "autograde: [%4.0f s] %s\n", s, line.c_str());
    std::fflush(stderr);
  };
  return config;
}

// What to grade: the submission, and the test seams --prebuilt and --prebuilt_flags.
distlm::grading::GradeRequest RequestFromFlags(const std::string& submission) {
  distlm::grading::GradeRequest request;
  request.submission = submission;
  request.time_overlap = absl::GetFlag(FLAGS_time_overlap);
  auto stage_and_value = [](const std::string& flag, const std::string& item) {
    auto eq = item.find('=');
    if (eq == std::string::npos || distlm::stages::Find(item.substr(0, eq)) == nullptr) {
      throw UserError("--" + flag + ": '" + item + "' is not STAGE=VALUE with a stage of common/stages/stages.h");
    }
    return std::make_pair(item.substr(0, eq), item.substr(eq + 1));
  };
  for (const auto& item : SplitComma(absl::GetFlag(FLAGS_prebuilt))) {
    auto [stage, binary] = stage_and_value("prebuilt", item);
    request.prebuilt[stage].binary = distlm::FromUserWorkingDirectory(binary);
  }
  for (const auto& item : SplitComma(absl::GetFlag(FLAGS_prebuilt_flags))) {
    auto [stage, flag] = stage_and_value("prebuilt_flags", item);
    if (request.prebuilt.count(stage) == 0) throw UserError("--prebuilt_flags: " + stage + " has no --prebuilt binary");
    request.prebuilt[stage].flags.push_back(flag);
  }
  return request;
}

// Grades, writes results.json (atomically, whatever happened) and says so; the exit code.
int GradeAndWrite(const distlm::grading::GraderConfig& config, const distlm::grading::GradeRequest& request,
                  const std::string& results) {
  nlohmann::json out;
  int code = 0;
  try {
    // A test seam (forged_results_test): what reaches the top when something unforeseen throws.
    if (const char* fault = std::getenv("DISTLM_AUTOGRADE_FAULT"); fault != nullptr) {
      if (std::string(fault) == "exception") throw std::logic_error("DISTLM_AUTOGRADE_FAULT=exception");
      if (std::string(fault) == "other") throw 42;
    }
    distlm::grading::Autograder grader(config);
    distlm::grading::GradeReport report = grader.Grade(request);
    out = report.ToGradescope();
    std::fputs(report.Summary().c_str(), stdout);
  } catch (const distlm::grading::GraderError& e) {
    // The grader's fault, not the student's: say so, score nothing, exit non-zero.
    out = {{"score", 0}, {"output", std::string("grader error (not your fault; tell the course staff): ") + e.what()},
           {"tests", nlohmann::json::array()}};
    std::fprintf(stdout, "grader error: %s\n", e.what());
    code = 1;
  } catch (const std::exception& e) {
    // Grade() turns what a submission does into test results; anything else that escapes is
    // still the grader's failure, and results.json still says so.
    out = {{"score", 0},
           {"output", std::string("grader error (not your fault; tell the course staff): unexpected: ") + e.what()},
           {"tests", nlohmann::json::array()}};
    std::fprintf(stdout, "grader error: unexpected: %s\n", e.what());
    code = 1;
  } catch (...) {
    out = {{"score", 0},
           {"output", "grader error (not your fault; tell the course staff): unexpected exception"},
           {"tests", nlohmann::json::array()}};
    std::fprintf(stdout, "grader error: unexpected exception\n");
    code = 1;
  }
  // Text a submission printed is made printable where it is quoted; `replace` keeps any byte
  // that slipped through from failing the dump.
  distlm::WriteFileAtomically(results, out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  std::fprintf(stdout, "results written to %s\n", results.c_str());
  std::fprintf(stderr, "autograde: graded in %.0f s: %s\n", SecondsSinceStart(),
               Ledger().Summary(SecondsSinceStart()).c_str());
  return code;
}


int Main(int argc, char** argv) {
  SecondsSinceStart();  // the clock starts here
  auto rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) throw UserError("unexpected argument '" + std::string(rest[1]) + "' (flags are --name=value)");
  const std::string submission = distlm::FromUserWorkingDirectory(absl::GetFlag(FLAGS_submission));
  const std::string results = distlm::FromUserWorkingDirectory(absl::GetFlag(FLAGS_results));
  if (submission.empty()) throw UserError("--submission: required (a directory or a .zip)");
  if (results.empty()) throw UserError("--results: required (where results.json goes)");

  const distlm::grading::GraderConfig config = ConfigFromFlags(submission, results);
  const distlm::grading::GradeRequest request = RequestFromFlags(submission);
  return GradeAndWrite(config, request, results);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "grades a submission and writes Gradescope's results.json.\n"
      "usage: autograde --submission=DIR_OR_ZIP --results=FILE [--kit=DIR] [--ranks=4] [--keep_work]");
  return distlm::RunMain([&] { return Main(argc, argv); });
}
