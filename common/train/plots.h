// PNG plots of training runs, drawn by gnuplot (Debian's gnuplot-nox, which tools/setup.sh
// installs) from what a run writes: train_log.jsonl (one line per update) and
// eval_results.json (one entry per evaluation).
//
//   RUN_DIR/plots/loss.png           training loss per update
//   RUN_DIR/plots/learning_rate.png  learning rate per update
//   RUN_DIR/plots/throughput.png     samples/s per update
//   RUN_DIR/plots/eval.png           accuracy, F1 and loss per evaluated epoch (when there are any)
//
// and, for several runs (//tools:plot), OUT/loss.png (the runs' losses overlaid),
// OUT/iteration_time.png (each run's mean iteration time over iterations 2..40, as bars) and,
// where runs were evaluated, OUT/accuracy_by_time.png (dev accuracy against the training time
// spent to reach it: the sum of step_time_ms up to the evaluated epoch's end).
#pragma once

#include <string>
#include <vector>

#include "common/plot/gnuplot.h"

namespace distlm::train {

using plot::GnuplotQuoted;
using plot::kPlotHeight;
using plot::kPlotWidth;
using plot::RunGnuplot;

// Writes RUN_DIR/plots/*.png. Returns the files written; *why says why none were (no gnuplot,
// no log) or what failed. Never throws for a missing or broken log: plots are a by-product.
std::vector<std::string> WriteRunPlots(const std::string& run_dir, std::string* why);

// Overlays `run_dirs` into OUT_DIR (made if needed), each labelled by its folder's name.
// Throws UserError naming a run folder without a readable train_log.jsonl.
std::vector<std::string> WriteComparisonPlots(const std::vector<std::string>& run_dirs, const std::string& out_dir);

}  // namespace distlm::train
