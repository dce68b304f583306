// The course's stages, once: what the mains, the autograder (grading/) and task 4's report
// (task4_bench/report.cc) know of each. Adding a stage is one row here, once its folder has
// student/ and reference/ files of the same names and :reference / :student binaries
// (grading/submission_test.cc checks the table against the tree; docs/instructor.md, "Adding a
// task", lists the rest).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace distlm::stages {

// How a stage's gradients travel, for the bytes the report expects (task4_bench/accounting.h
// has the closed forms).
enum class SyncPattern { kNone, kRingAllreduce, kGatherScatter, kReduceScatterAllGather, kAllreduceAllGather };

// How the autograder runs and scores a stage (grading/README.md).
struct Grading {
  int ranks = 4;                           // ranks the grader runs it on (1: one process)
  int parity_points = 0;                   // the first losses match the grader's single-node trace
  int comm_points = 0;                     // the synchronisation uses the collectives asked for
  std::vector<std::string> required_ops;   // every update must call each of these
  std::vector<std::string> forbidden_ops;  // and none of these
  bool optional = false;                   // graded only when the submission has the folder
  std::vector<std::string> run_flags;      // added to the grader's run flags for this stage
  // Task 3: the DDP's own tests (grading/ddp_checks.h), at this bucket cap (as in run_flags).
  bool ddp_checks = false;
  double bucket_cap_mb = 0;
};

// How task 4's report runs it (pattern kNone: not in the report).
struct Report {
  SyncPattern pattern = SyncPattern::kNone;  // what the expected traffic is computed as
};

struct Stage {
  std::string id;                  // names the stage in logs, messages, submissions and tests
  std::string package;             // the repository folder holding student/ and reference/
  std::vector<std::string> files;  // the student's files: the only ones taken from a submission
  std::string what;                // what the student writes, for messages
  // Accepts --comm_dtype=fp16|bf16 (its gradients travel by all_reduce); the stage's runner
  // refuses the flag otherwise, and task 4's report measures it in each dtype.
  bool takes_comm_dtype = false;
  Grading grading;
  Report report;
  // The reference binary, as a workspace-relative runfile.
  std::string reference_binary() const { return package + "/reference"; }
};

// In the order the course takes them (and the grader reports them). Points follow the work
// each part asks for (reference solutions: part 1 15 lines, 2a 34, 2b 16, 3 165, 5 54);
// docs/instructor.md has the table, with 25 more for the written report.
inline const std::vector<Stage>& All() {
  static const std::vector<Stage> stages = {
      // Every task trains with part 1's step; without part1/ the grader builds them with its own.
      {"part1", "part1_single", {"train_step.cc"}, "Backward / OptimizerStep / EndOfEpoch", false,
       {1, 10, 0, {}, {}, false}, {}},
      {"task2a", "task2a", {"grad_sync.cc"}, "SyncGradients (gather + scatter)", false,
       {4, 12, 3, {"gather", "scatter"}, {"allreduce", "reduce", "allgather", "reduce_scatter"}, false},
       {SyncPattern::kGatherScatter}},
      {"task2b", "task2b", {"grad_sync.cc"}, "SyncGradients (all_reduce)", true, {4, 8, 2, {"allreduce"}, {}, false},
       {SyncPattern::kRingAllreduce}},
      // The student's own DDP: parity on the bucketed version (3b) at a cap that makes several
      // buckets on the tiny model; grading/ddp_checks.h adds 28 points of its own tests.
      {"task3", "task3", {"bucketed_ddp.cc", "per_parameter_ddp.cc"},
       "your DistributedDataParallel (per-parameter, buckets, no_sync)", true,
       {4, 12, 0, {}, {}, false, {"--ddp=buckets", "--bucket_cap_mb=0.5"}, /*ddp_checks=*/true, /*bucket_cap_mb=*/0.5},
       {SyncPattern::kRingAllreduce}},
      // The advanced part: graded when submitted. Over Gloo (LibTorch 1.13 has no reduce_scatter
      // there) the reduce-scatter is an all_reduce plus a slice, so only the all-gather is a
      // collective of its own.
      {"task5", "task5", {"sharded_step.cc"}, "ShardedStep (reduce-scatter, shard step, all-gather)", false,
       {4, 16, 4, {"allgather"}, {}, true},
       {SyncPattern::kAllreduceAllGather}},
  };
  return stages;
}

// The row of `id`, or null.
inline const Stage* Find(const std::string& id) {
  for (const auto& s : All()) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

// The row of `id`; a logic error when there is none (a main naming itself wrongly).
inline const Stage& Get(const std::string& id) {
  const Stage* s = Find(id);
  if (s == nullptr) throw std::logic_error("no stage '" + id + "' in common/stages/stages.h");
  return *s;
}

}  // namespace distlm::stages
