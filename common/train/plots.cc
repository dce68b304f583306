#include "common/train/plots.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"

namespace distlm::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Update {
  double step = 0, epoch = NAN, loss = NAN, lr = NAN, samples_per_s = NAN, step_time_ms = NAN;
};

double Num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

// The updates of a run's train_log.jsonl (lines that are not JSON objects are skipped).
std::vector<Update> ReadLog(const std::string& run_dir) {
  std::vector<Update> out;
  std::ifstream in(run_dir + "/train_log.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    Update u;
    u.step = Num(j, "step");
    u.epoch = Num(j, "epoch");
    u.loss = Num(j, "loss");
    u.lr = Num(j, "lr");
    u.samples_per_s = Num(j, "samples_per_s");
    u.step_time_ms = Num(j, "step_time_ms");
    if (std::isfinite(u.step)) out.push_back(u);
  }
  return out;
}


std::string Header(const std::string& png, const std::string& title, const std::string& xlabel,
                   const std::string& ylabel) {
  std::ostringstream s;
  s << "set terminal pngcairo size " << kPlotWidth << "," << kPlotHeight << " font ',10'\n"
    << "set output " << GnuplotQuoted(png) << "\n"
    << "set title " << GnuplotQuoted(title) << "\nset xlabel " << GnuplotQuoted(xlabel) << "\nset ylabel " << GnuplotQuoted(ylabel)
    << "\nset grid\nset key top right\n"
    << "set termoption noenhanced\n";  // run names keep their underscores
  return s.str();
}

std::vector<std::string> Existing(const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) {
    if (fs::is_regular_file(f) && fs::file_size(f) > 0) out.push_back(f);
  }
  return out;
}

// The evaluation plot's axes. Epochs are whole: ticks on integers only (gnuplot's own choice
// put ticks at 1.5 and 2.5). Accuracy and F1 on [0, 1], where chance and learning can be told
// apart at a glance. The loss axis spans at least 2% of the loss: a run whose loss barely moves
// (0.69331 to 0.69334) otherwise got ticks closer than its labels' six digits, printed twice.
std::string EvalAxes(const json& evals) {
  double last_epoch = 1, lo = INFINITY, hi = -INFINITY;
  for (const auto& r : evals) {
    if (!r.is_object()) continue;
    last_epoch = std::max(last_epoch, Num(r, "epoch"));
    const double loss = Num(r, "loss");
    if (std::isfinite(loss)) lo = std::min(lo, loss), hi = std::max(hi, loss);
  }
  std::ostringstream s;
  const int step = std::max(1, static_cast<int>(std::ceil(last_epoch / 10)));
  s << "set xrange [0.5:" << last_epoch + 0.5 << "]\nset xtics " << step << "\nset format x '%.0f'\n"
    << "set yrange [0:1.05]\nset y2label 'loss'\nset y2tics\n"
    << "set key below horizontal\n";  // beside the curves it hid them where accuracy nears 1
  if (lo <= hi) {
    const double half = std::max((hi - lo) * 0.6, 0.01 * std::max(std::abs(hi), 1e-6));
    const double mid = (lo + hi) / 2;
    s.precision(9);
    s << "set y2range [" << mid - half << ":" << mid + half << "]\n";
  }
  return s.str();
}

}  // namespace

std::vector<std::string> WriteRunPlots(const std::string& run_dir, std::string* why) {
  why->clear();
  const std::vector<Update> log = ReadLog(run_dir);
  if (log.empty()) {
    *why = "no updates in " + run_dir + "/train_log.jsonl: no plots";
    return {};
  }
  const std::string dir = run_dir + "/plots";
  std::vector<std::string> files;
  try {
    fs::create_directories(dir);
    std::ostringstream train;
    train << "# update loss lr samples_per_s\n";
    train.precision(9);
    for (const auto& u : log) train << u.step << " " << u.loss << " " << u.lr << " " << u.samples_per_s << "\n";
    WriteFileAtomically(dir + "/train.dat", train.str());
    std::ostringstream gp;
    const std::string data = GnuplotQuoted(dir + "/train.dat");
    gp << Header(dir + "/loss.png", "training loss", "update", "loss") << "plot " << data
       << " using 1:2 with linespoints pointtype 7 pointsize 0.4 title 'loss'\n";
    gp << Header(dir + "/learning_rate.png", "learning rate", "update", "learning rate") << "plot " << data
       << " using 1:3 with lines title 'lr'\n";
    gp << Header(dir + "/throughput.png", "training throughput (all ranks)", "update", "samples/s") << "plot "
       << data << " using 1:4 with linespoints pointtype 7 pointsize 0.4 title 'samples/s'\n";
    files = {dir + "/loss.png", dir + "/learning_rate.png", dir + "/throughput.png"};
    std::ifstream eval_in(run_dir + "/eval_results.json");
    const json evals = json::parse(eval_in, nullptr, /*allow_exceptions=*/false);
    if (evals.is_array() && !evals.empty()) {
      std::ostringstream e;
      e << "# epoch accuracy f1 loss\n";
      e.precision(9);
      for (const auto& r : evals) {
        if (r.is_object()) e << Num(r, "epoch") << " " << Num(r, "accuracy") << " " << Num(r, "f1") << " " << Num(r, "loss") << "\n";
      }
      WriteFileAtomically(dir + "/eval.dat", e.str());
      const std::string ed = GnuplotQuoted(dir + "/eval.dat");
      gp << Header(dir + "/eval.png", "evaluation (dev set)", "epoch", "accuracy, F1") << EvalAxes(evals)
         << "plot " << ed << " using 1:2 with linespoints pointtype 7 title 'accuracy', " << ed
         << " using 1:3 with linespoints pointtype 5 title 'F1', " << ed
         << " using 1:4 axes x1y2 with linespoints pointtype 9 title 'loss (right axis)'\n"
         << "unset y2tics\nunset y2label\nset autoscale\nset xtics autofreq\nset format y2\n";
      files.push_back(dir + "/eval.png");
    }
    WriteFileAtomically(dir + "/plots.gp", gp.str());
  } catch (const std::exception& e) {
    *why = std::string("no plots: ") + e.what();
    return {};
  }
  *why = RunGnuplot(dir + "/plots.gp", dir + "/gnuplot.log");
  return why->empty() ? Existing(files) : std::vector<std::string>{};
}

// The runs' dev accuracy against the training time spent to reach it: for each evaluated epoch,
// the sum of the step_time_ms of its updates and the earlier ones (evaluation itself excluded).
// Writes OUT/runI.acc.dat for each run with evaluations; the gnuplot lines that draw
// OUT/accuracy_by_time.png from them, or "" when no run was evaluated.
std::string AccuracyByTime(const std::vector<std::string>& run_dirs, const std::string& out_dir) {
  std::ostringstream plot;
  for (size_t i = 0; i < run_dirs.size(); ++i) {
    std::ifstream in(run_dirs[i] + "/eval_results.json");
    const json evals = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!evals.is_array() || evals.empty()) continue;
    const std::vector<Update> log = ReadLog(run_dirs[i]);
    std::ostringstream d;
    d << "# training_s accuracy epoch\n";
    for (const auto& e : evals) {
      const double epoch = Num(e, "epoch"), accuracy = Num(e, "accuracy");
      if (!std::isfinite(epoch) || !std::isfinite(accuracy)) continue;
      double ms = 0;
      for (const auto& u : log) {
        if (u.epoch <= epoch && std::isfinite(u.step_time_ms)) ms += u.step_time_ms;
      }
      d << ms / 1000 << " " << accuracy << " " << epoch << "\n";
    }
    const std::string dat = out_dir + "/run" + std::to_string(i) + ".acc.dat";
    WriteFileAtomically(dat, d.str());
    std::string name = fs::path(run_dirs[i]).lexically_normal().filename().string();
    plot << (plot.tellp() > 0 ? ", " : "") << GnuplotQuoted(dat) << " using 1:2 with linespoints linewidth 2 pointtype 7 title "
         << GnuplotQuoted(name);
  }
  if (plot.tellp() == 0) return "";
  return Header(out_dir + "/accuracy_by_time.png", "dev accuracy against training time", "training time (s, log scale)",
                "dev accuracy") +
         "set key below horizontal\nset logscale x\nset yrange [0:1]\nplot " + plot.str() + "\n";
}

std::vector<std::string> WriteComparisonPlots(const std::vector<std::string>& run_dirs, const std::string& out_dir) {
  if (run_dirs.empty()) throw UserError("no run folders to plot");
  fs::create_directories(out_dir);
  std::ostringstream loss, bars;
  loss << Header(out_dir + "/loss.png", "training loss", "update", "loss") << "plot ";
  std::ostringstream iter;
  iter << "# run mean_iteration_ms\n";
  for (size_t i = 0; i < run_dirs.size(); ++i) {
    const std::vector<Update> log = ReadLog(run_dirs[i]);
    if (log.empty()) throw UserError(run_dirs[i] + "/train_log.jsonl: missing, or no update in it");
    std::string name = fs::path(run_dirs[i]).lexically_normal().filename().string();
    if (name.empty()) name = fs::path(run_dirs[i]).lexically_normal().parent_path().filename().string();
    std::ostringstream d;
    d.precision(9);
    for (const auto& u : log) d << u.step << " " << u.loss << "\n";
    const std::string dat = out_dir + "/run" + std::to_string(i) + ".dat";
    WriteFileAtomically(dat, d.str());
    loss << (i ? ", " : "") << GnuplotQuoted(dat) << " using 1:2 with lines linewidth 2 title " << GnuplotQuoted(name);
    // The handout's figure: the mean over iterations 2..40 (the first pays for warming up).
    double sum = 0;
    int n = 0;
    for (size_t k = 1; k < log.size() && k < 40; ++k) {
      if (std::isfinite(log[k].step_time_ms)) {
        sum += log[k].step_time_ms;
        ++n;
      }
    }
    std::string label = name;
    for (char& c : label) if (c == '"' || c == ' ') c = '_';
    iter << '"' << label << "\" " << (n > 0 ? sum / n : (log.empty() ? NAN : log[0].step_time_ms)) << "\n";
  }
  loss << "\n";
  const std::string by_time = AccuracyByTime(run_dirs, out_dir);
  WriteFileAtomically(out_dir + "/iteration_time.dat", iter.str());
  bars << Header(out_dir + "/iteration_time.png", "mean iteration time (iterations 2..40)", "run", "ms")
       << "set style fill solid 0.6\nset boxwidth 0.6\nset yrange [0:*]\nunset key\n"
       << "plot " << GnuplotQuoted(out_dir + "/iteration_time.dat") << " using 0:2:xtic(1) with boxes\n";
  WriteFileAtomically(out_dir + "/compare.gp", loss.str() + bars.str() + by_time);
  const std::string failed = RunGnuplot(out_dir + "/compare.gp", out_dir + "/gnuplot.log");
  if (!failed.empty()) throw UserError(failed);
  return Existing({out_dir + "/loss.png", out_dir + "/iteration_time.png", out_dir + "/accuracy_by_time.png"});
}

}  // namespace distlm::train
