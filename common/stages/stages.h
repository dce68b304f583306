// The course's stages, once: what the mains, the autograder (grading/) and task 4's report
// (task4_bench/report.cc) know of each. The rows are written in common/stages/stages.bzl (Bazel's
// lists of stage targets come from the same rows); adding a stage is one row there, once its
// folder has student/ and reference/ files of the same names and :reference / :student binaries
// (grading/submission_test.cc checks the table against the tree; docs/architecture.md, "Adding a
// stage", lists the rest).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace distlm::stages {

// How a stage's gradients travel, for the bytes the report expects (task4_bench/accounting.h
// has the closed forms).
enum class SyncPattern {
  kNone,
  kRingAllreduce,
  kGatherScatter,
  kReduceScatterAllGather,
  kAllreduceAllGather,
  kAllreduceTwoAllGathers,
};

// A test of the grader's that carries points, as results.json names it.
struct TestSpec {
  std::string name;
  int points = 0;
};

// How the autograder runs and scores a stage (grading/README.md).
struct Grading {
  int ranks = 4;                           // ranks the grader runs it on (1: one process)
  std::vector<std::string> required_ops;   // every update must call each of these
  std::vector<std::string> forbidden_ops;  // and none of these
  bool optional = false;                   // graded only when the submission has the folder
  // The stage's folder has a grading/ package: what the grader knows of it beyond this row
  // (run flags, its own mistakes and messages, tests beyond parity; grading/stage_grading.h).
  bool has_grading = false;
  // Ranks that share one model replica (model parallelism: each holds part of every layer and
  // reads the replica's whole batch); 0: data parallel, every rank a replica of its own. A
  // model-parallel stage runs on exactly this many ranks, whatever the grader's --ranks.
  int model_parallel = 0;
  // Every test of the stage that carries points, in report order: the parity test (the first
  // losses match the grader's single-node trace), the collectives test when has_comm_test (the
  // synchronisation uses required_ops and none of forbidden_ops), then the stage's own (its
  // grading/ package runs those). Names and points are written once, in stages.bzl.
  std::vector<TestSpec> tests;
  bool has_comm_test = false;
  const TestSpec& parity_test() const { return tests.at(0); }
  const TestSpec& comm_test() const { return tests.at(1); }  // only when has_comm_test
  // The stage's own tests: those after parity and collectives.
  std::vector<TestSpec> own_tests() const { return {tests.begin() + (has_comm_test ? 2 : 1), tests.end()}; }
  int points() const {
    int total = 0;
    for (const auto& t : tests) total += t.points;
    return total;
  }
};

// How task 4's report runs it (pattern kNone: not in the report).
struct Report {
  SyncPattern pattern = SyncPattern::kNone;  // what the expected traffic is computed as
};

// A row of the table: one stage of the course (its folder, files, grading and report).
struct Row {
  // Names the stage everywhere: its folder (the Bazel package holding student/ and reference/),
  // logs, messages, the submission's folder and the tests.
  std::string id;
  std::vector<std::string> files;  // the student's files: the only ones taken from a submission
  std::string what;                // what the student writes, for messages
  // Accepts --comm_dtype=fp16|bf16 (its gradients travel by all_reduce); the stage's runner
  // refuses the flag otherwise, and task 4's report measures it in each dtype.
  bool takes_comm_dtype = false;
  Grading grading;
  Report report;
  std::vector<std::string> models;  // the --model_type values it trains (bert, vit)
  // The reference binary, as a workspace-relative runfile.
  std::string reference_binary() const { return id + "/reference"; }
  // The ranks a grading runs it on when the grader's --ranks is `grader_ranks`.
  int RunRanks(int grader_ranks) const {
    if (grading.model_parallel > 0) return grading.model_parallel;
    return grading.ranks > 1 ? grader_ranks : 1;
  }
  // The model replicas `ranks` ranks make: each reads total_batch / Replicas(ranks) examples.
  int Replicas(int ranks) const { return grading.model_parallel > 0 ? ranks / grading.model_parallel : ranks; }
  bool Trains(const std::string& model_type) const {
    for (const auto& m : models) {
      if (m == model_type) return true;
    }
    return false;
  }
};

// In the order the course takes them (and the grader reports them): the rows of STAGES in
// common/stages/stages.bzl, generated into stages_table.inc (bazel-bin/common/stages/) by
// //common/stages:stages_table.
inline const std::vector<Row>& All() {
  static const std::vector<Row> stages = {
#include "common/stages/stages_table.inc"
  };
  return stages;
}

// What a submission of every stage is worth when graded on `model_type` (bert or vit); without
// the optional stages when `with_optional` is false.
inline int TotalPoints(const std::string& model_type, bool with_optional = true) {
  int total = 0;
  for (const auto& s : All()) {
    if (s.Trains(model_type) && (with_optional || !s.grading.optional)) total += s.grading.points();
  }
  return total;
}

// The row of `id`, or null.
inline const Row* Find(const std::string& id) {
  for (const auto& s : All()) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

// The row of `id`; a logic error when there is none (a main naming itself wrongly).
inline const Row& Get(const std::string& id) {
  const Row* s = Find(id);
  if (s == nullptr) throw std::logic_error("no stage '" + id + "' in common/stages/stages.h");
  return *s;
}

}  // namespace distlm::stages
