// Autograder: Grade() reads the submission, builds it (kit_build.cc) and grades each stage
// (grade_stage.cc) against the grader's own runs (grader_runs.h).
#include "grading/autograder.h"

#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/runtime/runfiles.h"
#include "grading/autograder_impl.h"
#include "grading/final_weights.h"
#include "grading/kit_build.h"
#include "grading/jail/sandbox.h"
#include "grading/stage_grading.h"
#include "grading/jail/student_space.h"
#include "grading/submission.h"
#include "grading/text.h"
#include "grading/traffic_check.h"

namespace distlm::grading {
namespace {

// A seed from the kernel's random source, in [1, 2^31): no submission can know it in advance.
uint64_t DrawSeed() {
  uint32_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof(v), 0) != static_cast<ssize_t>(sizeof(v))) {
      throw GraderError(std::string("cannot draw this grading's seed: getrandom: ") + strerror(errno));
    }
    v &= 0x7FFFFFFFu;
  }
  return v;
}

}  // namespace

Autograder::Autograder(GraderConfig config) : impl_(std::make_unique<Impl>()) {
  if (config.ranks < 1 || kTotalBatch % config.ranks != 0) {
    throw GraderError("--ranks=" + std::to_string(config.ranks) + " must divide the total batch of " +
                      std::to_string(kTotalBatch));
  }
  if (config.model_type != "bert" && config.model_type != "vit") {
    throw GraderError("--model_type must be bert or vit, got '" + config.model_type + "'");
  }
  impl_->config = std::move(config);
}

Autograder::~Autograder() = default;

std::vector<std::string> Autograder::RunFlags(int replicas, const std::string& model_type, const std::string& data_dir,
                                              uint64_t seed) {
  // What task2a/parity_test.cc uses: the tiny built-in model and data, no dropout, a learning
  // rate that makes a wrong update visible at once, one thread per rank (2 cores, 4 ranks).
  // The ViT's as grading/vit_parity_test.cc: its augmentation stays on (it depends on the seed,
  // the epoch and the example only, so every rank and stage sees the same pixels).
  std::vector<std::string> flags = {"--max_steps=" + std::to_string(kSteps),
                                    "--per_gpu_train_batch_size=" + std::to_string(kTotalBatch / replicas),
                                    "--learning_rate=1e-3",
                                    "--hidden_dropout_prob=0",
                                    "--attention_probs_dropout_prob=0",
                                    "--do_eval=false",
                                    "--num_threads=1",
                                    "--dist_timeout_s=60",
                                    // every rank's final weights, for final_weights.h
                                    "--save_every_rank"};
  if (seed != 0) flags.push_back("--seed=" + std::to_string(seed));
  if (model_type == "vit") {
    flags.insert(flags.end(), {"--model_type=vit", "--task_name=cifar10", "--data_dir=" + data_dir});
  } else {
    flags.push_back("--max_seq_length=64");
  }
  return flags;
}

GradeReport Autograder::Grade(const GradeRequest& req) {
  Impl& im = *impl_;
  GradeReport report;
  const auto started = std::chrono::steady_clock::now();
  const std::string work = MakeTempDir("autograde", im.config.work_root);
  struct Cleanup {
    std::string dir;
    bool keep;
    ~Cleanup() {
      if (!keep) RemoveTree(dir);
    }
  } cleanup{work, im.config.keep_work};
  if (im.config.keep_work) report.notes.push_back("work folder kept: " + work);

  // A new secret for every grading, and a new trace: nothing computed before this grading (the
  // handout's numbers, an earlier grading's) is the answer to this one. With a seed the
  // instructor (or a test) set, the traces of the last grading still hold.
  const uint64_t seed = im.config.seed != 0 ? im.config.seed : DrawSeed();
  im.space = std::make_unique<StudentSpace>(im.config, work);
  report.notes.push_back(std::string("every run used a seed ") +
                         (im.config.seed != 0 ? "set by the instructor" : "drawn for this grading") +
                         " (model initialisation, data order), not the handout's 42: your numbers differ from your "
                         "self-check's, and are compared with the grader's own run on the same seed");
  im.runs.StartGrading(im.space.get(), seed);
  if (im.config.model_type == "vit") {
    report.notes.push_back("every run trained the tiny ViT on a CIFAR-10-format set (--model_type=vit), not the "
                           "tiny BERT");
  }
  Submission sub = LoadSubmission(req.submission, im.space->GraderFolder("submission"));
  report.notes.insert(report.notes.end(), sub.notes.begin(), sub.notes.end());
  for (const auto& i : sub.ignored) report.notes.push_back("ignored: " + i);
  std::vector<const stages::Row*> graded;
  for (const auto& st : stages::All()) {
    if (!st.Trains(im.config.model_type)) {
      if (sub.stages.at(st.id).folder_present) {
        std::string models;
        for (const auto& m : st.models) models += (models.empty() ? "" : ", ") + m;
        report.notes.push_back(st.id + "/ is not graded with --model_type=" + im.config.model_type + ": " + st.id +
                               " trains " + models + " only");
      }
    } else if (!st.grading.optional || sub.stages.at(st.id).folder_present) {
      graded.push_back(&st);
    } else {
      report.notes.push_back(st.id + "/ is optional and was not submitted: not graded");
    }
  }
  std::map<std::string, BuildOutcome> builds;
  if (!sub.fatal.empty()) {
    for (const stages::Row* st : graded) builds[st->id].message = "the submission could not be read: " + sub.fatal;
  } else {
    builds = BuildSubmission(im.config, graded, sub, req.prebuilt, im.space.get(), &report.notes);
  }
  // From here on student code runs, each run writing only in its own folder (student_space.h).
  im.space->SealForRuns();
  im.time_overlap = req.time_overlap;
  if (const std::string d = im.space->Description(); !d.empty()) report.notes.push_back(d);
  for (const stages::Row* st : graded) im.GradeStage(*st, sub.stages.at(st->id), builds[st->id], &report);
  report.notes.insert(report.notes.end(), im.runs.notes().begin(), im.runs.notes().end());
  report.execution_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace distlm::grading
