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
};

// In the order tests are reported.
inline const std::vector<StageSpec>& Stages() {
  static const std::vector<StageSpec> stages = {
      // Part 1 is graded for feedback only (no points): it is optional in the deliverable.
      {"part1", "part1_single", {"train_step.cc"}, 1, 0, 0, {}, {}, true,
       "Backward / OptimizerStep / EndOfEpoch"},
      {"task2a", "task2a", {"grad_sync.cc"}, 4, 8, 2, {"gather", "scatter"},
       {"allreduce", "reduce", "allgather", "reduce_scatter"}, false, "SyncGradients (gather + scatter)"},
      {"task2b", "task2b", {"grad_sync.cc"}, 4, 8, 2, {"allreduce"}, {}, false, "SyncGradients (all_reduce)"},
      // The student's own DDP: graded on the bucketed version (3b), which trains the runs.
      {"task3", "task3", {"bucketed_ddp.cc", "per_parameter_ddp.cc"}, 4, 8, 2, {"allreduce"}, {}, false,
       "your DistributedDataParallel (per-parameter, buckets, no_sync)",
       // Several buckets on the tiny model, so the run overlaps communication with backward.
       {"--ddp=buckets", "--bucket_cap_mb=0.5"}},
      // The advanced part: graded when submitted. Over Gloo the reduce-scatter is an all_reduce
      // plus a slice (zero::ReduceScatterSum), so only the all-gather is a collective of its own.
      {"task5", "task5", {"sharded_step.cc"}, 4, 8, 2, {"allgather"}, {}, true,
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
