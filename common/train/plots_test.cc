// The evaluation plot's axes, read back from what gnuplot draws: the script WriteRunPlots writes
// is rendered again on gnuplot's text terminal ("dumb"), whose tick labels are plain text.
#include "common/train/plots.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace distlm::train {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A run folder with three updates and the given evaluations, as (epoch, accuracy, f1, loss).
std::string MakeRun(const std::string& name, const std::vector<std::vector<double>>& evals) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::create_directories(dir);
  Write(dir + "/train_log.jsonl",
        "{\"step\":1,\"loss\":0.7,\"lr\":1e-3,\"samples_per_s\":10}\n"
        "{\"step\":2,\"loss\":0.69,\"lr\":5e-4,\"samples_per_s\":11}\n"
        "{\"step\":3,\"loss\":0.68,\"lr\":0,\"samples_per_s\":12}\n");
  std::ostringstream e;
  e.precision(9);
  e << "[";
  for (size_t i = 0; i < evals.size(); ++i) {
    e << (i ? "," : "") << "{\"epoch\":" << evals[i][0] << ",\"accuracy\":" << evals[i][1]
      << ",\"f1\":" << evals[i][2] << ",\"loss\":" << evals[i][3] << "}";
  }
  Write(dir + "/eval_results.json", e.str() + "]");
  return dir;
}

// The eval plot's part of plots.gp, drawn as text; returns what gnuplot printed.
std::string DrawEvalAsText(const std::string& run_dir) {
  const std::string gp = Slurp(run_dir + "/plots/plots.gp");
  const size_t at = gp.find("/plots/eval.png");
  EXPECT_NE(at, std::string::npos) << gp;
  const size_t start = gp.rfind("set terminal", at);
  std::string eval = gp.substr(start);
  eval = std::regex_replace(eval, std::regex("set terminal [^\n]*"), "set terminal dumb size 100,30");
  eval = std::regex_replace(eval, std::regex("set output [^\n]*"), "set output '" + run_dir + "/eval.txt'");
  Write(run_dir + "/eval_text.gp", eval);
  const std::string why = RunGnuplot(run_dir + "/eval_text.gp", run_dir + "/gnuplot.log");
  EXPECT_EQ(why, "") << Slurp(run_dir + "/gnuplot.log");
  return Slurp(run_dir + "/eval.txt");
}

// The numbers on the text plot's last labelled line (the x axis' tick labels).
std::vector<std::string> XTickLabels(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l.find_first_not_of(" \f") != std::string::npos) lines.push_back(l);
  }
  // The tick labels are the line above the axis label "epoch" (the key is below both).
  auto label = lines.rbegin();
  while (label != lines.rend() && !std::regex_match(*label, std::regex(" *epoch *"))) ++label;
  for (auto it = label; it != lines.rend(); ++it) {
    if (std::regex_search(*it, std::regex("[0-9]"))) {
      std::vector<std::string> labels;
      std::smatch m;
      std::string rest = *it;
      while (std::regex_search(rest, m, std::regex("[0-9.]+"))) labels.push_back(m.str()), rest = m.suffix();
      return labels;
    }
  }
  return {};
}

// The right axis' tick labels: the number ending each line drawn with a border, after it.
std::vector<std::string> Y2TickLabels(const std::string& text) {
  std::vector<std::string> labels;
  std::istringstream in(text);
  const std::regex right_label("[|+-] +([0-9]+\\.[0-9]+) *$");
  std::smatch m;
  for (std::string l; std::getline(in, l);) {
    if (std::regex_search(l, m, right_label)) labels.push_back(m[1]);
  }
  return labels;
}

TEST(PlotsTest, EvalPlotTicksAreWholeEpochsAndDistinctLosses) {
  if (RunGnuplot("/dev/null", std::string(std::getenv("TEST_TMPDIR")) + "/probe.log") != "") {
    GTEST_SKIP() << "SKIPPED: no gnuplot (tools/setup.sh installs gnuplot-nox)";
  }
  // A loss that barely moves, as a model that learns nothing has (the default run's was
  // 0.69331 to 0.69334, and its loss axis printed 0.69331 twice).
  const std::string run = MakeRun("flat", {{1, 0.5, 0, 0.693314}, {2, 0.5, 0, 0.693322}, {3, 0.5, 0, 0.693338}});
  std::string why;
  ASSERT_EQ(WriteRunPlots(run, &why).size(), 4u) << why;
  const std::string text = DrawEvalAsText(run);
  const auto x = XTickLabels(text);
  EXPECT_EQ(x, (std::vector<std::string>{"1", "2", "3"})) << "x tick labels: whole epochs only\n" << text;
  const auto y2 = Y2TickLabels(text);
  EXPECT_GE(y2.size(), 3u) << text;
  EXPECT_EQ(std::set<std::string>(y2.begin(), y2.end()).size(), y2.size()) << "a loss tick label repeats\n" << text;
}

TEST(PlotsTest, ManyEpochsGetAtMostElevenTicks) {
  if (RunGnuplot("/dev/null", std::string(std::getenv("TEST_TMPDIR")) + "/probe.log") != "") {
    GTEST_SKIP() << "SKIPPED: no gnuplot (tools/setup.sh installs gnuplot-nox)";
  }
  std::vector<std::vector<double>> evals;
  for (int e = 1; e <= 40; ++e) evals.push_back({double(e), 0.5 + e / 100.0, 0.5, 0.7 - e / 100.0});
  const std::string run = MakeRun("long", evals);
  std::string why;
  ASSERT_EQ(WriteRunPlots(run, &why).size(), 4u) << why;
  const auto x = XTickLabels(DrawEvalAsText(run));
  EXPECT_LE(x.size(), 11u);
  for (const auto& label : x) EXPECT_EQ(label.find('.'), std::string::npos) << "tick " << label;
}

}  // namespace
}  // namespace distlm::train
