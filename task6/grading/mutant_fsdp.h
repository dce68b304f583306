// task6/fsdp.h's functions as the grader's own, with one deliberate mistake: the one
// FsdpMutation() names. Linked into the grader's mutant stage (mutant_stage.cc) and into task
// 6's local test run on the mistakes (fsdp_mistakes_test.cc). Grader-private, as all of grading/.
//
// "fsdp_none" is the reference. The grading suite grades fsdp_no_average, fsdp_wrong_shard,
// fsdp_reduced_twice, fsdp_no_reshard, fsdp_no_prefetch and fsdp_reduce_waited; the others
// change only what the local test sees: fsdp_overwrite_shard (the shard overwritten, not
// added to), fsdp_grad_kept (the full gradient never freed), fsdp_prefetch_forward_only (in
// backward, the unit after the current one prefetched, as in forward).
#pragma once

#include <string>
#include <vector>

namespace distlm::task6 {

std::string& FsdpMutation();
const std::vector<std::string>& FsdpMutations();

}  // namespace distlm::task6
