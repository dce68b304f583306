// A DDP of the grader's own with one deliberate mistake: the one DdpMutation() names when
// MakePerParameterDdp or MakeBucketedDdp (task3/ddp.h) is called. "none": a correct DDP; the
// mistakes: launch_at_finish (no all-reduce before backward ends), forward_order (buckets
// filled from the first parameter), no_division (the sum, not the mean), ignore_no_sync
// (communicates in every backward), silent_unused (no error for a parameter without a
// gradient), wait_in_hook (each all-reduce waited where it is launched), fill_order (each bucket
// launched once complete, not in bucket order), cap_by_rank (rank r's cap is r + 1 times the
// cap: buckets that differ between ranks), forged_overlap (launch_at_finish, and the stage's
// binary rewrites its log at exit to claim every all-reduce overlapped), forged_no_sync
// (ignore_no_sync, its log rewritten to claim nothing was sent while accumulating), junk_overlap
// (launch_at_finish, with an all-reduce of zeros the size of each gradient sent as the gradient
// arrives, so that the wire is busy during backward, and the log rewritten as forged_overlap's). Not a
// mistake: honest_slow, a correct DDP shaped unlike the reference and slower than it (an extra
// copy of every gradient before it is packed, the mean taken in double precision through a copy
// each way), which must keep its points; unbucketed, right too, with one all-reduce per
// parameter in 3b, the design 3b replaces (tools/overlap_margin.sh measures what its overlap
// test makes of it).
// Grader-private.
#pragma once

#include <string>

namespace distlm::task3 {

std::string& DdpMutation();

}  // namespace distlm::task3
