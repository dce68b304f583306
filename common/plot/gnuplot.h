// Running gnuplot (Debian's gnuplot-nox, which tools/setup.sh installs) and quoting for its
// scripts: what the training plots (common/train/plots.h), the timelines (common/trace) and
// task 4's figures share.
#pragma once

#include <string>

namespace distlm::plot {

// Every PNG is this size (wider ones are a multiple of it).
inline constexpr int kPlotWidth = 900;
inline constexpr int kPlotHeight = 500;

// `text` as a gnuplot single-quoted string (a path, a title).
std::string GnuplotQuoted(const std::string& text);

// Runs `gnuplot SCRIPT` (no shell), its output into `log`. "" on success, otherwise why not
// ("gnuplot is not installed ...", "gnuplot failed: see LOG").
std::string RunGnuplot(const std::string& script, const std::string& log);

}  // namespace distlm::plot
