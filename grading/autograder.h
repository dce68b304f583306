// The autograder: reads a submission, builds it on a clean copy of the student kit, runs each
// task on N local ranks under time and memory limits, compares the losses with a trace the
// grader makes itself (part 1's reference, one process, the same total batch), and reports
// per test, in Gradescope's format and as text. grading/README.md has the points and the
// messages; common/stages/stages.h the tasks.
//
// Nothing a submission does makes Grade() throw: missing or extra files, compile errors,
// crashes, hangs and wrong numbers are test results. It throws GraderError only when the
// grader itself cannot work (its own reference run fails, the kit cannot be made).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/stages/stages.h"
#include "grading/jail/grader_error.h"
#include "grading/jail/jail.h"
#include "grading/jail/student_space.h"
#include "grading/stage_runner.h"
#include "grading/test_result.h"
#include "grading/trace.h"

namespace distlm::grading {

struct GradeReport {
  std::vector<TestResult> tests;
  std::vector<std::string> notes;  // how the submission was read, built and run
  double execution_time_s = 0;     // the whole grading
  double score() const;
  double max_score() const;
  // Gradescope's results.json: {"score", "execution_time", "output", "visibility", "tests":
  // [{"name", "score", "max_score", "status", "output", "visibility"}]}.
  nlohmann::json ToGradescope() const;
  // The same for a terminal: one line per test, then the details of what did not pass.
  std::string Summary() const;
};

// A binary standing in for a stage's build (tests, and grading without Bazel).
struct Prebuilt {
  std::string binary;
  std::vector<std::string> flags;  // added to the grader's flags (e.g. --mutation=...)
};

// Everything the grader is told; what its jail needs of it (the limits on student code, the
// checkout to hide) is the SpaceLimits it extends (grading/jail/student_space.h).
struct GraderConfig : SpaceLimits {
  // Where a submission is built: a fresh kit made from source_root (SpaceLimits: a checkout),
  // or a copy of the ready kit in kit_dir; then `bazel build //<package>:student` in it.
  std::string kit_dir;
  std::string kit_revision = "HEAD";  // the commit of source_root; "" = its working tree
  std::string bazel = "/usr/bin/bazel";
  // The grader's own build of the clean kit (trusted, perhaps from a cold cache); the
  // submission's build has SpaceLimits::build_timeout_s.
  double kit_build_timeout_s = 1800;
  // What every run trains: "bert", the tiny built-in BERT on the built-in RTE sample, or
  // "vit", the tiny ViT on a CIFAR-10-format set the grader writes for each grading (80 images,
  // shown read-only to student code). The same tests, points and messages either way: the
  // students' files never see the model, so a submission that passes on one passes on both.
  std::string model_type = "bert";
  std::string cifar_sample_binary;  // //common/vision:make_sample_cifar10; empty: among the runfiles
  // The seed of every run of a grading (model initialisation, data order): 0 draws a new one
  // from the kernel for each grading, so the numbers a correct run logs are known to nobody
  // before it runs (the handout's self-check uses the public seed 42). Tests set it.
  uint64_t seed = 0;
  // How each task runs.
  int ranks = 4;                                  // must divide the total batch of 8
  int64_t memory_limit_bytes = int64_t{4} << 30;  // address space per process
  bool isolate_network = true;                    // unjailed runs: a loopback-only namespace, when root
  int64_t build_memory_limit_bytes = int64_t{16} << 30;  // address space per process of the build
  // The grader's own binaries; empty: found among its runfiles.
  std::string expected_binary;  // part 1's reference
  std::string mutant_binary;    // grading/mutant_stage
  // Runs the known mistakes (grading/mutant_stage) to name the one a failing trace matches.
  bool recognise_mistakes = true;
  std::string work_root;  // where work folders go; empty: $TEST_TMPDIR, $TMPDIR or /tmp
  bool keep_work = false;
  std::function<void(const std::string&)> progress;  // one line per step, for a terminal
};

struct GradeRequest {
  std::string submission;                    // a directory or a .zip
  std::map<std::string, Prebuilt> prebuilt;  // stage id -> binary: no kit, no build for it
  // false: overlap is not timed, and is credited as not judged, saying so (the mutation suites'
  // mistakes that lie elsewhere, whose timed runs would cost minutes each). A grading of a
  // submission always times it.
  bool time_overlap = true;
};

class Autograder {
 public:
  explicit Autograder(GraderConfig config);
  ~Autograder();

  GradeReport Grade(const GradeRequest& request);

  // The flags of every graded run: the total batch of 8 split over `replicas` (the ranks of a
  // data-parallel stage; stages::Row::Replicas), `seed` (0: the trainer's default, 42). For
  // model_type "vit", data_dir is the CIFAR-10-format folder.
  static std::vector<std::string> RunFlags(int replicas, const std::string& model_type = "bert",
                                           const std::string& data_dir = "", uint64_t seed = 0);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace distlm::grading
