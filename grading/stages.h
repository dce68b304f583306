// What the autograder grades: one row per stage of the course. Adding a stage (task3, task5)
// is one row here, once its folder has student/ and reference/ files of the same names and a
// //<package>:student binary (grading/submission_test.cc checks the table against the tree).
#pragma once

#include <string>
#include <vector>

namespace distlm::grading {

struct StageSpec {
  std::string id;                  // the submission's folder and the tests' name prefix
  std::string package;             // the repository folder holding student/ and reference/
  std::vector<std::string> files;  // the student's files: the only ones taken from a submission
  int ranks = 4;                   // ranks the grader runs it on (1: one process)
  int parity_points = 0;           // the first losses match the grader's single-node trace
  int comm_points = 0;             // the synchronisation uses the collectives the task asks for
  std::vector<std::string> required_ops;   // every update must call each of these
  std::vector<std::string> forbidden_ops;  // and none of these
  bool optional = false;           // graded only when the submission has the folder
  std::string what;                // what the student writes, for messages
  std::vector<std::string> run_flags;  // added to the grader's run flags for this stage
  // Task 3: the DDP's own tests (grading/ddp_checks.h), at this bucket cap (as in run_flags).
  bool ddp_checks = false;
  double bucket_cap_mb = 0;
};

// In the order tests are reported. Points follow the work each part asks for (the reference
// solutions: part 1 15 lines, 2a 34, 2b 16, 3 165, 5 54); docs/instructor.md has the table, with
// 25 more for the written report.
inline const std::vector<StageSpec>& Stages() {
  static const std::vector<StageSpec> stages = {
      // Every task trains with part 1's step; without part1/ the grader builds them with its own.
      {"part1", "part1_single", {"train_step.cc"}, 1, 10, 0, {}, {}, false,
       "Backward / OptimizerStep / EndOfEpoch"},
      {"task2a", "task2a", {"grad_sync.cc"}, 4, 12, 3, {"gather", "scatter"},
       {"allreduce", "reduce", "allgather", "reduce_scatter"}, false, "SyncGradients (gather + scatter)"},
      {"task2b", "task2b", {"grad_sync.cc"}, 4, 8, 2, {"allreduce"}, {}, false, "SyncGradients (all_reduce)"},
      // The student's own DDP: parity on the bucketed version (3b) at a cap that makes several
      // buckets on the tiny model; grading/ddp_checks.h adds 28 points of its own tests.
      {"task3", "task3", {"bucketed_ddp.cc", "per_parameter_ddp.cc"}, 4, 12, 0, {}, {}, false,
       "your DistributedDataParallel (per-parameter, buckets, no_sync)",
       {"--ddp=buckets", "--bucket_cap_mb=0.5"}, /*ddp_checks=*/true, /*bucket_cap_mb=*/0.5},
      // The advanced part: graded when submitted. Over Gloo the reduce-scatter is an all_reduce
      // plus a slice, so only the all-gather is a collective of its own.
      {"task5", "task5", {"sharded_step.cc"}, 4, 16, 4, {"allgather"}, {}, true,
       "ShardedStep (reduce-scatter, shard step, all-gather)"},
  };
  return stages;
}

inline const StageSpec* FindStage(const std::string& id) {
  for (const auto& s : Stages()) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

}  // namespace distlm::grading
