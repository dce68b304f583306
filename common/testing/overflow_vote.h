// The --fp16 overflow vote of a stage whose ranks hold different gradients when the loss scaler
// checks them (task 5: before its sharded step averages them; task 6: each rank's own shards):
// on 2 ranks, an overflow in rank 1's gradients only (DISTLM_FAULT_INF_GRAD=1:2) must skip update
// 2 on both, back the scale off, and let training go on. Without the vote rank 0 would step
// alone and the next update's collectives would not pair up (a hang). Needs float16 autocast
// on CPU (LibTorch 2.4+): on 1.13 the test says SKIPPED and the 2.11 line of CI runs it.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/version.h>

#include "common/testing/subprocess.h"

namespace distlm::testing {

// `stage`: its folder (task5, task6), whose :reference and //tools:launch the test has as data.
inline void ExpectOneRanksOverflowSkipsTheUpdateOnEveryRank(const std::string& stage) {
#if TORCH_VERSION_MAJOR == 1
  GTEST_SKIP() << "SKIPPED: LibTorch " << TORCH_VERSION << "'s CPU autocast has no float16: " << stage
               << "'s vote on an overflow was NOT run here (the 2.11 line runs it)";
#endif
  const std::string out = MakeTempDir(stage + "_fp16");
  Command c;
  c.argv = {Runfile("tools/launch"), "--nproc_per_node=2", "--", Runfile(stage + "/reference"), "--fp16",
            "--max_steps=3", "--num_threads=1", "--max_seq_length=32", "--per_gpu_train_batch_size=2",
            "--do_eval=false", "--plots=false", "--dist_timeout_s=30", "--output_dir=" + out};
  c.env = {{"DISTLM_FAULT_INF_GRAD", "1:2"}};
  auto r = Run(c, 180);
  ASSERT_FALSE(r.timed_out) << "the ranks hung (did only one of them skip?):\n" << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(out + "/train_log.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(lines.size(), 3u) << r.output;
  EXPECT_EQ(lines[0]["skipped"], false) << lines[0].dump();
  EXPECT_EQ(lines[1]["skipped"], true) << "rank 1's overflow did not skip update 2: " << lines[1].dump();
  EXPECT_EQ(lines[2]["skipped"], false) << lines[2].dump();
  EXPECT_EQ(lines[2]["loss_scale"], 32768.0) << "the scale did not back off: " << lines[2].dump();
}

}  // namespace distlm::testing
