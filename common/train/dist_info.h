// The process group a stage trains over, as the Trainer and the stages see it; empty (world
// size 1, no group) for one process. Stage::Connect makes it.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace distlm::train {

struct DistInfo {
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // picks the GPU under --device=cuda
  std::string backend = "none";
  std::string described;  // how the ranks were started and found each other (rank 0 prints it)
  // Throws a one-line UserError on every rank when ranks disagree on (what, value).
  std::function<void(const std::string& what, const std::string& value)> check_agreement;
  // Turns a failed collective into a message naming the lost rank.
  std::function<std::string(const std::exception&)> describe_failure;
  // Task 7c: the group of this rank's part of `parts`, a partition of the ranks, counted as pg
  // is (dist::NewSubgroup: every rank calls it with the same parts and tag). Null for one process.
  std::function<c10::intrusive_ptr<c10d::ProcessGroup>(const std::vector<std::vector<int>>& parts,
                                                       const std::string& tag)>
      new_subgroup;
  std::shared_ptr<void> keep_alive;  // whatever owns the group (store, heartbeat, ...)
};

}  // namespace distlm::train
