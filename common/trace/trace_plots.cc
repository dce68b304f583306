#include "common/trace/trace_plots.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "common/plot/gnuplot.h"

namespace distlm::trace {
namespace {

namespace fs = std::filesystem;
using plot::GnuplotQuoted;

struct Phase {
  const char* category;
  const char* colour;
  double height;  // of the row; the optimizer step's parts are drawn thinner, inside it
};

// The main thread's categories as drawn, in the legend's order, and collectives.
const Phase kPhases[] = {
    {"forward", "#4c72b0", 0.8},  {"backward", "#dd8452", 0.8},       {"grad_sync", "#c44e52", 0.8},
    {"optimizer_step", "#55a868", 0.8}, {"clip", "#8172b3", 0.4},    {"optimizer", "#937860", 0.4},
    {"snapshot", "#8c8c8c", 0.8}, {"comm", "#da8bc3", 0.8},
};

const Phase* PhaseOf(const std::string& category) {
  for (const Phase& p : kPhases) {
    if (category == p.category) return &p;
  }
  return nullptr;
}

// One row per (rank, thread): the main thread first, then each communication lane.
std::map<std::pair<int, int>, int> Rows(const nlohmann::json& events, std::string* ytics) {
  std::map<std::pair<int, int>, int> rows;
  for (const auto& e : events) {
    if (e.value("ph", "") == "X") rows[{e.value("pid", 0), e.value("tid", 0)}] = 0;
  }
  int row = 0;
  std::ostringstream t;
  for (auto& [key, r] : rows) {
    r = row++;
    t << (r == 0 ? "" : ", ") << GnuplotQuoted("rank " + std::to_string(key.first) +
                                                (key.second == 1 ? "" : " comm " + std::to_string(key.second - 10)))
      << " " << r;
  }
  *ytics = t.str();
  return rows;
}

}  // namespace

std::vector<std::string> WriteTracePlots(const nlohmann::json& merged, const std::string& dir, std::string* why) {
  why->clear();
  const nlohmann::json& events = merged["traceEvents"];
  double t0 = std::numeric_limits<double>::infinity(), t1 = -t0;
  for (const auto& e : events) {
    if (e.value("ph", "") == "X" && e.value("cat", "") == "update") {
      t0 = std::min(t0, e.value("ts", 0.0));
      t1 = std::max(t1, e.value("ts", 0.0) + e.value("dur", 0.0));
    }
  }
  if (!(t0 <= t1)) {
    *why = "no update in the trace: no pictures";
    return {};
  }
  std::string ytics;
  const auto rows = Rows(events, &ytics);
  std::ostringstream boxes, updates, memory;
  boxes.precision(9);
  memory.precision(9);
  // rank -> (ms, MiB): the bytes in use, and the model state the rank holds (parameters,
  // gradients, optimizer state: what ZeRO's formulas count) after each update.
  std::map<int, std::vector<std::pair<double, double>>> in_use, model_state;
  for (const auto& e : events) {
    const std::string ph = e.value("ph", "");
    const double ms = (e.value("ts", 0.0) - t0) / 1000.0;
    if (ph == "C" && e.value("name", "") == "memory") {
      const auto args = e.value("args", nlohmann::json::object());
      in_use[e.value("pid", 0)].emplace_back(ms, args.value("in_use_bytes", 0.0) / (1 << 20));
      continue;
    }
    if (ph == "C" && e.value("name", "") == "model state") {
      const auto args = e.value("args", nlohmann::json::object());
      const double bytes = args.value("held_param_bytes", 0.0) + args.value("held_grad_bytes", 0.0) +
                           args.value("held_opt_bytes", 0.0);
      model_state[e.value("pid", 0)].emplace_back(ms, bytes / (1 << 20));
      continue;
    }
    if (ph != "X") continue;
    const std::string category = e.value("cat", "");
    const double dur = e.value("dur", 0.0) / 1000.0;
    if (category == "update") {
      // Rank 0's updates begin here (each rank's own begins are on its row).
      if (e.value("pid", 0) == 0) {
        updates << "set arrow from " << ms << ", graph 0 to " << ms << ", graph 1 nohead dt 2 lc rgb '#999999'\n";
      }
      continue;
    }
    const Phase* p = PhaseOf(category);
    if (p == nullptr) continue;
    const int row = rows.at({e.value("pid", 0), e.value("tid", 0)});
    // x centre, y, half width (at least a hair, so an instant still shows), half height, colour.
    boxes << ms + dur / 2 << " " << row << " " << std::max(dur / 2, 0.002) << " " << p->height / 2 << " "
          << std::stoi(p->colour + 1, nullptr, 16) << "\n";
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::vector<std::string> files;
  {
    std::ofstream(dir + "/timeline.dat") << boxes.str();
    const int n = static_cast<int>(rows.size());
    std::ostringstream s;
    s << "set terminal pngcairo size " << plot::kPlotWidth + 300 << "," << std::max(300, 120 + 45 * n)
      << " font ',10' noenhanced\nset output " << GnuplotQuoted(dir + "/timeline.png") << "\n"
      << "set title " << GnuplotQuoted(merged["otherData"].value("stage", std::string("?")) + ": the traced updates") << "\n"
      << "set xlabel 'ms'\nset yrange [" << n - 0.5 << ":-0.5]\nset ytics (" << ytics << ")\n"
      << "set key outside right top\nset grid x\n"
      << "set xrange [" << -0.01 * (t1 - t0) / 1000.0 << ":" << 1.01 * (t1 - t0) / 1000.0 << "]\n"
      << updates.str() << "plot " << GnuplotQuoted(dir + "/timeline.dat")
      << " using 1:2:3:4:5 with boxxyerror fs solid 0.9 noborder lc rgb variable notitle";
    for (const Phase& p : kPhases) {
      s << ", NaN with boxes fs solid 0.9 lc rgb " << GnuplotQuoted(p.colour) << " title "
        << GnuplotQuoted(std::string(p.category) == "comm" ? "collective" : p.category);
    }
    s << "\n";
    std::ofstream(dir + "/timeline.gp") << s.str();
    *why = plot::RunGnuplot(dir + "/timeline.gp", dir + "/gnuplot.log");
    if (!why->empty()) return {};
    files.push_back(dir + "/timeline.png");
  }
  if (!in_use.empty()) {
    std::ostringstream s;
    s << "set terminal pngcairo size " << plot::kPlotWidth << "," << plot::kPlotHeight
      << " font ',10' noenhanced\nset output " << GnuplotQuoted(dir + "/memory.png") << "\nset title 'bytes in use through the traced updates'\n"
      << "set xlabel 'ms'\nset ylabel 'MiB'\nset grid\nset key top right\n"
      << updates.str() << "plot ";
    bool first = true;
    auto series = [&](std::map<int, std::vector<std::pair<double, double>>>& by_rank, const std::string& file,
                      const std::string& style, const std::string& what) {
      for (auto& [rank, points] : by_rank) {
        std::sort(points.begin(), points.end());
        const std::string data = dir + "/" + file + "-rank-" + std::to_string(rank) + ".dat";
        std::ofstream out(data);
        out.precision(9);
        for (const auto& [ms, mib] : points) out << ms << " " << mib << "\n";
        s << (first ? "" : ", ") << GnuplotQuoted(data) << " using 1:2 with steps " << style << " lc " << rank + 1
          << " title " << GnuplotQuoted("rank " + std::to_string(rank) + what);
        first = false;
      }
    };
    series(in_use, "memory", "lw 2", ": bytes in use");
    series(model_state, "model-state", "lw 1 dt 2", ": model state held (parameters, gradients, AdamW)");
    s << "\n";
    std::ofstream(dir + "/memory.gp") << s.str();
    *why = plot::RunGnuplot(dir + "/memory.gp", dir + "/gnuplot.log");
    if (!why->empty()) return files;
    files.push_back(dir + "/memory.png");
  }
  return files;
}

}  // namespace distlm::trace
