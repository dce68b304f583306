// Task 3's grading (grading/stage_grading.h): the main run is the bucketed DDP (3b) at a cap
// that makes several buckets of the tiny model, and the DDP's own tests (ddp_checks.h) follow
// the parity test.
#include <cstdio>
#include <string>
#include <vector>

#include "grading/stage_grading.h"
#include "task3/grading/ddp_checks.h"

namespace distlm::task3 {
namespace {

using grading::StageCheckContext;
using grading::StageRun;
using grading::TestResult;

// The tiny BERT's gradients are 2.24 MB, the tiny ViT's 0.32: the cap shrinks with them, so the
// student's DDP still makes 4 buckets to order and to overlap with backward, not one that would
// pass those tests whatever it did.
double BucketCapMb(const std::string& model_type) { return model_type == "vit" ? 0.08 : 0.5; }

class Task3Grading : public grading::StageGrading {
 public:
  std::vector<std::string> RunFlags(const std::string& model_type) const override {
    char cap[64];
    std::snprintf(cap, sizeof(cap), "--bucket_cap_mb=%g", BucketCapMb(model_type));
    return {"--ddp=buckets", cap};
  }
  // The grader's own DDP (mutant_ddp.h): overlapped, and with every all-reduce launched after
  // backward, for the overlap judged by time.
  std::string MutantBinary() const override { return "task3/grading/mutant_ddp_stage"; }
  std::vector<std::string> OverlapMutantFlags(bool overlapped) const override {
    return {overlapped ? "--ddp_mutation=none" : "--ddp_mutation=launch_at_finish"};
  }
  std::string DivideWhere() const override { return " in FinishGradientSync, once its all-reduces are done"; }
  std::vector<TestResult> ExtraTests(const StageRun& main_run, const StageCheckContext& c) const override {
    grading::DdpCheckContext d{c};
    d.bucket_cap_mb = BucketCapMb(c.model_type);
    return grading::DdpTests(main_run, d);
  }
};

DISTLM_STAGE_GRADING("task3", Task3Grading);

}  // namespace
}  // namespace distlm::task3
