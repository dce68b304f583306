// Task 2a's grading (grading/stage_grading.h): only where its messages say to divide; its
// collectives and points are its row's (common/stages/stages.bzl).
#include <string>

#include "grading/stage_grading.h"

namespace distlm::task2a {
namespace {

class Task2aGrading : public grading::StageGrading {
 public:
  std::string DivideWhere() const override { return " on rank 0, before the scatter"; }
};

DISTLM_STAGE_GRADING("task2a", Task2aGrading);

}  // namespace
}  // namespace distlm::task2a
