// Task 7a's local test (task7/student_test.cc, linked beside this file) run on the reference
// with each of f's and g's usual mistakes (mutants.h): each must fail with the message that
// names it, not only "differs by N %".
#include <gtest/gtest.h>

#include <string>

#include "grading/mistake_runs.h"
#include "task7/grading/mutants.h"

namespace distlm::task7 {
namespace {

const grading::LocalTest kLocal = {"DISTLM_TP_MUTATION", "7a", "//task7:student_test"};

// Every rank of the local test reads its mistake from the environment its parent set.
[[maybe_unused]] const bool kMutationRead = grading::ReadMutation(kLocal.var, Mutation());

std::string RunWith(const std::string& mutation) {
  return grading::RunLocalTest(kLocal, mutation, mutation, "mlp");
}

TEST(TensorParallelMistakesTest, TheReferencePasses) { EXPECT_EQ(RunWith("tp_none"), ""); }

TEST(TensorParallelMistakesTest, FWithoutItsBackwardSum) {
  const std::string m = RunWith("tp_f_no_backward");
  EXPECT_NE(m.find("the backward of CopyToTensorParallel (f) did not all-reduce the input gradient"),
            std::string::npos) << m;
}

TEST(TensorParallelMistakesTest, GThatAlsoSumsInBackward) {
  const std::string m = RunWith("tp_g_backward_reduced");
  EXPECT_NE(m.find("x.grad is 2 times the whole model's"), std::string::npos) << m;
  EXPECT_NE(m.find("ReduceFromTensorParallel (g)"), std::string::npos) << m;
}

TEST(TensorParallelMistakesTest, GWithoutItsForwardSum) {
  const std::string m = RunWith("tp_g_no_reduce");
  EXPECT_NE(m.find("the partial products were not summed over the ranks in forward (g)"), std::string::npos) << m;
}

TEST(TensorParallelMistakesTest, TheBiasOnEveryRank) {
  const std::string m = RunWith("tp_bias_per_rank");
  EXPECT_NE(m.find("RowParallelLinear's output has the bias 2 times"), std::string::npos) << m;
}

}  // namespace
}  // namespace distlm::task7
