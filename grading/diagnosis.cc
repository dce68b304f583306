// Why a graded trace differs from the grader's: see diagnosis.h.
#include "grading/diagnosis.h"

#include <cmath>
#include <string>


namespace distlm::grading {

std::string Diagnose(const Trace& got, const Trace& want, const stages::Row& st, const StageGrading& grading,
                     int ranks, const MistakeRuns& mistakes, const MistakeRuns& own_mistakes) {
  const double n = ranks;
  for (size_t i = 0; i < kSteps && i < got.losses.size(); ++i) {
    if (!std::isfinite(got.losses[i])) {
      return "your loss is not a number (NaN or inf) from update " + std::to_string(i + 1) +
             " on: the gradients were corrupted (uninitialised buffers? a division by zero?).";
    }
  }
  if (st.grading.model_parallel > 0) {
    // The ranks share one replica and each reads the whole batch: the data-parallel mistakes and
    // heuristics below do not apply. The stage's own grading knows what its code does.
    std::string own = grading.Diagnose(got, want, own_mistakes());
    if (!own.empty()) return own;
    return RelDiff(got.losses[0], want.losses[0]) > kParityTol
               ? "the very first loss (computed before any optimizer step) already differs: the split model's "
                 "forward does not compute the whole model's."
               : "the first loss matches but the training that follows does not: the split model's backward "
                 "or its update differs from the whole model's.";
  }
  // Update 1's loss is computed before any optimizer step: only the data can differ.
  const bool first_matches = RelDiff(got.losses[0], want.losses[0]) <= kParityTol;
  if (!first_matches) {
    std::string msg =
        "the very first loss (computed before any optimizer step) already differs, so the ranks did not "
        "train on the right examples: each rank must take its own share of every batch (a DistributedSampler), "
        "not the same examples as the others.";
    for (const auto& km : mistakes()) {
      if (km.mutation == "same_data" && Close(got.losses, km.trace.losses, kSteps, kMistakeTol)) {
        msg += " Your losses match, update for update, a run in which every rank reads the whole data set in "
               "the same order.";
      }
    }
    return msg;
  }
  if (!grading.OwnMistakes().empty()) {
    std::string own = grading.Diagnose(got, want, own_mistakes());
    if (!own.empty()) return own;
  }
  for (const auto& km : mistakes()) {
    if (!Matches(got, km)) continue;
    if (km.mutation == "no_sync") {
      const bool communicated = !got.comm_calls.empty() && got.comm_calls[0] > 0;
      if (!communicated) {
        return "your ranks never synchronise their gradients: each trains on its own share of the batch and "
               "the models drift apart (your losses are exactly those of a run without any synchronisation). "
               "Your " + st.what + " must leave, on every rank, the average over all ranks in every parameter's "
               ".grad.";
      }
      return "your code communicates, but the optimizer never sees the result: the losses are exactly those of "
             "ranks that do not synchronise at all. Write the average back into each parameter's .grad itself "
             "(not into a copy or a temporary), and synchronise before the optimizer step, not after it.";
    }
    if (km.mutation == "sum_without_average") {
      const std::string where = grading.DivideWhere();
      return "your gradients look summed but not divided by the world size: divide the sum by " +
             Fmt("%.0f", n) + " (pg.getSize())" + where + ". As it is, the gradient is " + Fmt("%.0f", n) +
             " times too large (its norm before clipping was " + Fmt("%.4f", got.grad_norms[0]) + ", " +
             Times(got.grad_norms[0], want.grad_norms[0]) + " the single-node one).";
    }
    if (km.mutation == "some_params_only") {
      return "only some of the parameters are synchronised: your losses match a run in which the first half of "
             "the parameters are averaged and the rest keep each rank's own gradient. Average the .grad of every "
             "tensor in `parameters`.";
    }
    if (km.mutation == "root_only_average") {
      return "only rank 0 ends with the average: the other ranks keep their own gradients (your losses match "
             "exactly that mistake, with rank 0's gradient norm right). After rank 0 has averaged what it "
             "gathered, scatter the average back so that every rank writes it into its .grad.";
    }
    if (km.mutation == "rank0_keeps_own") {
      return "rank 0 keeps its own gradient: the other ranks receive the average, but rank 0 does not write it "
             "into its own .grad (your losses match exactly that mistake). Rank 0 must train on the average too.";
    }
  }
  // Not a known mistake: what the numbers say.
  std::string msg;
  const double ratio = got.grad_norms.empty() ? NAN : got.grad_norms[0] / want.grad_norms[0];
  if (std::abs(ratio - n) <= 1e-3 * n) {
    msg = "your gradients look summed but not divided by the world size: rank 0's gradient norm before "
          "clipping is " + Fmt("%.3f", ratio) + " times the single-node one (" + Fmt("%.0f", n) + " ranks).";
  } else if (std::abs(ratio - 1 / n) <= 1e-3 / n) {
    msg = "your gradients look divided by the world size once too often: their norm is 1/" + Fmt("%.0f", n) +
          " of the single-node one.";
  } else if (!got.comm_calls.empty() && got.comm_calls[0] == 0) {
    msg = "your synchronisation did not communicate anything in update 1: every rank trained on its own "
          "gradients.";
  } else if (Close(got.losses, want.losses, kSteps, kParityTol)) {
    msg = "the losses match the single-node run, but the gradient norm logged for update 1 is " +
          Fmt("%.6g", got.grad_norms[0]) + ", " + Times(got.grad_norms[0], want.grad_norms[0]) +
          " the single-node run's: the optimizer step must return the norm of the (averaged) gradients measured before clipping.";
  } else if (std::abs(ratio - 1) <= 1e-4) {
    msg = "the gradient of update 1 matches the single-node one (norm " + Fmt("%.4f", got.grad_norms[0]) +
          "), but the losses differ later: check what happens after the synchronisation (clipping, the "
          "optimizer step, the learning-rate schedule, zeroing the gradients) and that every rank ends with the "
          "same gradients.";
  } else {
    msg = "the first optimizer step already differs: rank 0's gradient norm before clipping was " +
          Fmt("%.4f", got.grad_norms[0]) + ", " + Times(got.grad_norms[0], want.grad_norms[0]) +
          " the single-node run's. After your synchronisation every rank must hold the average over all ranks of every parameter's "
          "gradient: sum over all ranks, divide by their number, write it back into .grad on every rank "
          "(rank 0 included).";
  }
  for (size_t i = 0; i < kSteps && i < got.lrs.size() && i < want.lrs.size(); ++i) {
    if (RelDiff(got.lrs[i], want.lrs[i]) > 1e-9) {
      msg += " Also, update " + std::to_string(i + 1) + " used the learning rate " + Fmt("%.6g", got.lrs[i]) +
             " where the schedule gives " + Fmt("%.6g", want.lrs[i]) +
             ": advance the schedule once per update and give the optimizer its rate.";
      break;
    }
  }
  return msg;
}

}  // namespace distlm::grading
