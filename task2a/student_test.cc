// Task 2a's local tests: bazel test //task2a:student_test
//
// Two updates of a small network on 2 and 4 real ranks (Gloo over 127.0.0.1): after your
// SyncGradients every .grad must be the average over ranks (gather to rank 0 and scatter back), checked against what
// each rank computes by itself; a failure names the rank, the parameter and what the numbers
// look like.
#include "common/testing/gradient_checks.h"
#include "common/testing/rank_test.h"
#include "task2a/grad_sync.h"

namespace distlm::task2a {
namespace {

RANK_CASE(average) { testing::CheckGradientSync(env, SyncGradients, {"gather", "scatter"}, {"allreduce", "reduce", "allgather", "reduce_scatter"}); }

TEST(Task2aSyncGradients, AveragesOnTwoRanks) { EXPECT_RANKS_PASS("average", 2); }
TEST(Task2aSyncGradients, AveragesOnFourRanks) { EXPECT_RANKS_PASS("average", 4); }

}  // namespace
}  // namespace distlm::task2a
