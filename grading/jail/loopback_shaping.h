// A rate limit on loopback in the calling thread's network namespace: a token-bucket qdisc
// (tbf) on `lo`, set through netlink with system calls only, so that a child between fork and
// exec can call it (grading/jail/sandbox.cc does, in a graded run's own namespace).
//
// Why: the grader judges overlap by time (grading/overlap_check.h). On a link that carries a
// fixed number of bytes a second, an update whose communication travels during backward takes
// about the longer of the two; one that communicates after backward takes their sum. Every
// rank's traffic leaves through `lo`'s one queue, so the rate is the whole run's.
#pragma once

#include <cstdint>

namespace distlm::grading {

// Replaces lo's root qdisc with tbf at `bytes_per_s`. The burst covers one of lo's largest
// packets (64 KiB with its segmentation offload) twice over, and the queue holds 64 MiB, so
// that nothing a run sends is dropped (a drop on loopback costs TCP a 200 ms retransmission).
// Returns 0, or the errno of the step that failed (EPERM without CAP_NET_ADMIN in the namespace;
// ENOENT where the kernel has no tbf).
int ShapeLoopback(uint64_t bytes_per_s);

}  // namespace distlm::grading
