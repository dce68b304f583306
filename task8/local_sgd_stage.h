// Task 8's stage: local SGD and DiLoCo on part 1's step. Given code; the student writes the
// outer loop (outer_loop.h) it calls.
//
// Every worker trains alone on its own share of the data (the distributed sampler's, as in task
// 2b), with its own AdamW and part 1's step. A round ends after --inner_steps updates, and also
// at an epoch's last update, so that evaluation, the snapshot and the saved model see the model
// every worker holds; the last round of an epoch may be shorter. Between rounds nothing is
// exchanged: the loss in the log is rank 0's own, and comm_bytes is 0 on every update that does
// not end a round.
//
// The update that ends a round logs "round" (1-based), "round_updates" (the inner updates it
// took), "compression" (--compression: none, or int8 for 8b) and the round's communication: comm_bytes and friends, counted by the process group,
// and comm_time_ms, the time the outer step took.
//
// 8c, with --elastic: a worker lost in a round (its collective failed) is left behind, the
// survivors take the round's outer step among themselves and train on (the round's line logs
// "left"); a worker started with --join in a free slot is let in at a round's end with the
// others' parameters, outer state and position (the round's line logs "joined"). membership.h
// says how they meet.
#pragma once

#include <functional>
#include <memory>

#include "common/train/stage.h"
#include "task8/outer_loop.h"

namespace distlm::task8 {

// The flags --outer_lr, --outer_momentum and --outer_nesterov; a UserError naming the flag for
// a value torch.optim.SGD would refuse (lr <= 0, momentum outside [0, 1), Nesterov without momentum).
OuterOptimizerOptions OuterOptionsFromFlags();
// --inner_steps: H >= 1, or a UserError naming the flag.
int64_t InnerStepsFromFlags();
// --compression: none or int8, or a UserError naming the flag.
Compression CompressionFromFlags();

using OuterLoopFactory = std::function<std::unique_ptr<OuterLoop>(const OuterOptimizerOptions&, Compression)>;

std::unique_ptr<train::Stage> MakeLocalSgdStage(train::TrainStep step, OuterLoopFactory make_outer_loop);

}  // namespace distlm::task8
