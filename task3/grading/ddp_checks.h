// Task 3's tests beyond the parity of its main run: the student's own DDP judged on what it is
// for (grading/README.md, "Task 3"), handed to the grader by task3/grading/grading.cc. From the
// main run (--ddp=buckets at the stage's cap):
//   the bucket layout   reverse parameter order, closed at the cap (from ddp_parameters.json
//                       and ddp_buckets.json, which task3/ddp_stage.cc writes);
//   the overlap         every bucket's all-reduce but the last launched before backward ended.
// From runs of their own:
//   3a                  --ddp=per_parameter: parity, and one all-reduce per parameter;
//   no_sync (3c)        --gradient_accumulation_steps=2: parity, nothing sent during the
//                       accumulating backward, each gradient sent once per update;
//   unused parameter    --ddp_unused_parameter on 2 ranks: must fail naming it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "grading/stage_grading.h"
#include "grading/stage_runner.h"
#include "grading/test_result.h"
#include "grading/trace.h"

namespace distlm::grading {

// What the grader hands every stage's own tests, and the bucket cap of the main run.
struct DdpCheckContext : StageCheckContext {
  double bucket_cap_mb = 25;
};

// Task 3's own tests as its row names them (OwnTests), run. `main_run` completed its kSteps
// updates.
std::vector<TestResult> DdpTests(const StageRun& main_run, const DdpCheckContext& context);

// The bucket sizes (elements) that task 3b's rule gives: parameters walked from the last to
// the first (or the first to the last), a bucket closed once it holds at least cap_bytes.
std::vector<int64_t> ExpectedBuckets(const std::vector<int64_t>& numels, int64_t cap_bytes, bool last_first);

// Where launched bucket sizes `got` first leave the rule's `want` for the parameters `params`
// (registration order) and cap: "bucket K (B bytes): <the property it breaks>", without the
// rule's sizes.
std::string FirstBrokenBucket(const std::vector<int64_t>& got, const std::vector<int64_t>& want,
                              const std::vector<int64_t>& params, int64_t cap);

}  // namespace distlm::grading
