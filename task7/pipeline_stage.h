// Task 7b's given code around the student's loop (pipeline_parallel.h): BERT cut into P blocks
// of units for P ranks, one batch cut into M micro-batches, and what each step cost.
//
// Stage s holds encoder layers [s L / P, (s + 1) L / P) (as even as L allows), stage 0 the
// embeddings too, stage P - 1 the head (pooler and classifier) and the loss. What travels is
// a micro-batch's hidden states, [B / M, S, H] floats, forward, and their gradient backward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/bert/bert_model.h"
#include "common/model/units_batch.h"
#include "task7/pipeline_parallel.h"

namespace distlm::task7 {

// Stage s's units, first and last (unit_hooks.h's numbering: 0 the embeddings, 1..L the
// layers, L + 1 the head). std::invalid_argument naming the numbers when the layers are fewer
// than the stages.
struct UnitRange {
  int first = 0, last = 0;
};
UnitRange StageUnits(int layers, int stages, int stage);

// A batch, whole ([B, S] each; labels [B]).
struct PipelineBatch {
  torch::Tensor input_ids, token_type_ids, attention_mask, labels;
};

// One forward or backward as it ran: which, the micro-batch, and when (ns, steady clock), plus
// the bytes the process held in tensors when it ended (runtime::MemoryMeter; -1 when not
// installed).
struct StepTiming {
  PipelineStep step;
  int64_t start_ns = 0, end_ns = 0;
  int64_t bytes_in_use = -1;
};

// The stage of the pipeline over `pg` (stage = its rank) that runs `units` of `batch` (a model's
// batch cut into micro-batches: model/units_batch.h): its forward is the block's on the
// micro-batch, on the last stage the micro-batch's mean loss divided by M x `loss_divisor` (so
// that the gradients add up to those of the batch's mean loss over `loss_divisor`); its backward
// is autograd's from there. The steps it runs append to *timings (null: not recorded).
PipelineStage MakePipelineStage(const model::UnitsBatch& batch, UnitRange units, double loss_divisor,
                                const dist::GroupPtr& pg, std::vector<StepTiming>* timings);

// Stage `stage` of the pipeline over `pg` (stage = its rank) on `model` (every rank holds the
// whole model; a stage's steps touch only its units' parameters), the batch cut into
// `micro_batches` equal parts along the batch. The forward and backward it hands the loop
// append to *timings. std::invalid_argument naming the numbers when M does not divide B or the
// layers are fewer than the stages.
PipelineStage MakeBertPipelineStage(bert::BertForSequenceClassification& model, const PipelineBatch& batch,
                                    int micro_batches, const dist::GroupPtr& pg, std::vector<StepTiming>* timings);

// What a stage's timings say: busy time (forward and backward), the span from its first step's
// start to its last step's end, and the idle share of a makespan (the pipeline's, from the
// earliest start to the latest end over all stages) that this stage did not compute.
struct StageFigures {
  double busy_ms = 0, forward_ms = 0, backward_ms = 0;
  double idle_share = 0;  // 1 - busy / makespan
};
StageFigures FiguresOf(const std::vector<StepTiming>& timings, int64_t start_ns, int64_t end_ns);

}  // namespace distlm::task7
