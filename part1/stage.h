// Part 1's stage: the base stage with part 1's three pieces, on one process. Given code.
#pragma once

#include <memory>

#include "common/train/stage.h"

namespace distlm::part1 {

// Accepts --master_ip/--world_size/... like every stage, but only world size 1: otherwise a
// one-line error pointing at the distributed stages.
std::unique_ptr<train::Stage> MakeStage(train::TrainStep step);

}  // namespace distlm::part1
