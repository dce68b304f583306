// task5/sharded_step.h's ShardedStep as the grader's own, with one deliberate mistake: the one
// ZeroMutation() names. Linked into the grader's mutant stage (mutant_stage.cc) and into task
// 5's local test run on the mistakes (zero_mistakes_test.cc). Grader-private, as all of grading/.
//
// "zero_none" is the reference. The grader recognises zero_no_allgather, zero_wrong_shard and
// zero_local_norm by their losses (grading.cc); the others change only what the local test
// sees: zero_no_division (the sum, not the mean), zero_own_gradient (nothing reduced),
// zero_no_clip, zero_clipped_norm (the norm after clipping returned), zero_gather_first (the
// all-gather before the step).
#pragma once

#include <string>
#include <vector>

namespace distlm::task5 {

std::string& ZeroMutation();
const std::vector<std::string>& ZeroMutations();

}  // namespace distlm::task5
