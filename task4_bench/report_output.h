// What the scaling report (report.cc) writes: CSV tables, gnuplot's PNGs and report.md.
#pragma once

#include <string>
#include <vector>

#include "task4_bench/accounting.h"
#include "task4_bench/report_runs.h"

namespace distlm::task4_bench {

// Each begins with a `model` column (ReportModel::name).
std::string ScalingCsv(const std::vector<ScalingRow>& rows);
std::string TrafficCsv(const std::vector<TrafficRow>& rows);
std::string TensorsCsv(const std::vector<ReportModel>& models);

// gnuplot: two panels (samples/s and efficiency against ranks, one line per stage and link),
// and expected against observed bytes per rank per update, under <out>/plots. Returns "" or
// why there are no plots.
std::string Plot(const Env& env, const std::vector<ScalingRow>& scaling, const std::vector<TrafficRow>& traffic);

// report.md: the tables, how to read them, how to run the same on a real cluster. `command` is
// the command line that wrote it.
std::string Markdown(const Env& env, const std::vector<ScalingRow>& scaling, const std::vector<TrafficRow>& traffic,
                     const std::string& plot_note, const std::string& command);

}  // namespace distlm::task4_bench
