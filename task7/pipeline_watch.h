// 7b's local tests watch the pipeline's messages, so that the mistakes a loop of sends and
// receives can make are named in the loop's terms instead of ending in Gloo's timeout:
//   - a Work waited that cannot complete (a deadlock: a send waited before its peer posted the
//     matching recv, or a recv no one sends to): after `stuck_after_s`, each stuck stage says
//     which of its operations it waits on, with whom, and what else it has pending;
//   - a Work waited twice;
//   - a message whose tag is not its micro-batch (sent, or handed to a step).
// Given code: the local tests wrap the stage they hand your RunPipelineSteps with it.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/dist/c10d_compat.h"
#include "task7/pipeline_parallel.h"

namespace distlm::task7 {

class PipelineWatch {
 public:
  explicit PipelineWatch(double stuck_after_s = 10);
  ~PipelineWatch();

  // `stage` with its group watched and its forward and backward checking the tags of what they
  // are handed. A broken rule throws (testing::Fail) from inside the loop, naming it.
  PipelineStage Watch(PipelineStage stage);

  struct State;  // what the watched group and its works share

 private:
  std::shared_ptr<State> state_;
};

}  // namespace distlm::task7
