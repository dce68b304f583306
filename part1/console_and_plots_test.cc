// What a user sees and gets from a run (part 1's reference, the tiny built-in model): the
// progress line redrawn in place on a terminal (a pseudo-terminal made by `script`), plain lines
// in a pipe, and the PNG plots beside the logs.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/tensorboard/event_writer.h"
#include "common/testing/subprocess.h"

namespace distlm {
namespace {

namespace fs = std::filesystem;

std::string Flags(const std::string& out) {
  return " --max_steps=5 --per_gpu_train_batch_size=8 --max_seq_length=64 --num_threads=1 --logging_steps=2"
         " --output_dir=" + out;
}

// Width and height of a PNG file, or {-1, -1} when it is not one.
std::pair<int64_t, int64_t> PngSize(const std::string& path) {
  const std::string b = testing::ReadFileOrEmpty(path);
  if (b.size() < 24 || b.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || b.compare(12, 4, "IHDR") != 0) return {-1, -1};
  auto be32 = [&](size_t at) {
    int64_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

TEST(ConsoleAndPlotsTest, OnATerminalTheProgressLineIsRedrawnInPlace) {
  const std::string out = testing::MakeTempDir("tty") + "/run";
  testing::Command c;
  // `script` gives the run a pseudo-terminal and copies what it printed.
  c.argv = {"/usr/bin/script", "-qec", testing::Runfile("part1/reference") + Flags(out), "/dev/null"};
  auto p = testing::Run(c, 300);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("\r\033[Ktrain [####"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("samples/s |"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find(", ETA "), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("train [####################] 5/5 100%"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("\r\033[Keval ["), std::string::npos) << "evaluation has its own line: " << p.output;
}

TEST(ConsoleAndPlotsTest, InAPipePlainLinesAndPlotsBesideTheLogs) {
  const std::string out = testing::MakeTempDir("pipe") + "/run";
  testing::Command c;
  c.argv = {"/bin/sh", "-c", testing::Runfile("part1/reference") + Flags(out) + " | cat"};
  auto p = testing::Run(c, 300);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_EQ(p.output.find('\r'), std::string::npos) << "no carriage returns in a pipe";
  EXPECT_NE(p.output.find("\ntrain 2/5  40% epoch 1 loss "), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("\ntrain 5/5 100% epoch 1 loss "), std::string::npos) << p.output;
  EXPECT_EQ(p.output.find("\ntrain 3/5"), std::string::npos) << "--logging_steps=2: " << p.output;
  EXPECT_NE(p.output.find("plots in " + out + "/plots (4 PNG files)"), std::string::npos) << p.output;
  for (const char* name : {"loss", "learning_rate", "throughput", "eval"}) {
    const auto [w, h] = PngSize(out + "/plots/" + name + ".png");
    EXPECT_EQ(w, 900) << name << ".png is not a 900x500 PNG";
    EXPECT_EQ(h, 500) << name;
  }
}

TEST(ConsoleAndPlotsTest, NoPlotsWhenAskedNot) {
  const std::string out = testing::MakeTempDir("noplots") + "/run";
  testing::Command c;
  c.argv = {"/bin/sh", "-c", testing::Runfile("part1/reference") + Flags(out) + " --plots=false --do_eval=false"};
  auto p = testing::Run(c, 300);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_FALSE(fs::exists(out + "/plots"));
}

// --report_to=tensorboard: one event file in OUTPUT_DIR/runs/<stage and settings>, its records
// intact, the file version first, the run's arguments as a text table, then one event per
// update carrying the log line's numbers (train/loss, train/lr, ...) and one per evaluation
// (eval/accuracy, ...). (//tools/peers:tensorboard_test reads such files with TensorBoard itself.)
TEST(ConsoleAndPlotsTest, TensorBoardScalarsPerUpdateAndEvaluation) {
  const std::string out = testing::MakeTempDir("tb") + "/run";
  testing::Command c;
  c.argv = {testing::Runfile("part1/reference"), "--max_steps=5", "--per_gpu_train_batch_size=8",
            "--max_seq_length=64", "--num_threads=1", "--plots=false", "--report_to=tensorboard",
            "--output_dir=" + out};
  auto p = testing::Run(c, 300);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const std::string dir = out + "/runs/part1_1rank_fp32_b8_lr5e-05";
  ASSERT_TRUE(fs::is_directory(dir)) << p.output;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].find("/events.out.tfevents."), std::string::npos) << files[0];
  const std::vector<std::string> records = tensorboard::ReadRecords(files[0]);
  ASSERT_GE(records.size(), 8u) << "the file version, the arguments, 5 updates, at least one evaluation";
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  EXPECT_NE(records[1].find("| per_gpu_train_batch_size | 8 |"), std::string::npos) << records[1];
  EXPECT_NE(records[1].find("text"), std::string::npos) << "the text plugin's name";
  int updates = 0, evals = 0;
  for (size_t i = 2; i < records.size(); ++i) {
    if (records[i].find("train/loss") != std::string::npos) {
      ++updates;
      EXPECT_NE(records[i].find("train/lr"), std::string::npos) << "update record " << i;
      EXPECT_NE(records[i].find("train/step_time_ms"), std::string::npos) << "update record " << i;
    }
    if (records[i].find("eval/accuracy") != std::string::npos) ++evals;
  }
  EXPECT_EQ(updates, 5);
  EXPECT_GE(evals, 1);
}

TEST(ConsoleAndPlotsTest, ReportToNamesWhatItTakes) {
  testing::Command c;
  c.argv = {testing::Runfile("part1/reference"), "--report_to=wandb", "--output_dir=" + testing::MakeTempDir("rt")};
  auto p = testing::Run(c, 60);
  EXPECT_NE(p.exit_code, 0);
  EXPECT_NE(p.output.find("--report_to=wandb: want tensorboard, all"), std::string::npos) << p.output;
}

}  // namespace
}  // namespace distlm
