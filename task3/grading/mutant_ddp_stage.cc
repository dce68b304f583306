// //task3/grading:mutant_ddp_stage -- task 3's stage (task3/ddp_stage.cc) over the grader's DDP
// with one deliberate mistake (mutant_ddp.h), chosen by --ddp_mutation. The grader runs it with
// none and launch_at_finish to time overlap (overlap_check.h); the grading suite grades
// it as a task 3 submission and checks that each mistake loses its points with its own message
// (grading/README.md, "The mutation suite").
//
// Grader-private, as grading/mutant_stage.cc: with --ddp_mutation=none it is a correct DDP.
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "common/train/run_stage.h"
#include "grading/mutation_flag.h"
#include "part1/train_step.h"
#include "task3/ddp_stage.h"
#include "task3/grading/mutant_ddp.h"

ABSL_FLAG(std::string, ddp_mutation, "none", "none (a correct DDP), or a mistake of task3/grading/mutant_ddp.h");

namespace {

// What a submission that read the grader can do to its own log at exit. forged_overlap: every
// update claims that all its all-reduces started inside backward and were hidden (junk_overlap's
// too, whose wire was busy during backward with bytes that carried nothing).
// forged_no_sync: an update that also communicated in its accumulating backward claims it did not.
void ForgeLog(const std::string& output_dir, const std::string& mutation) {
  const std::string path = output_dir + "/train_log.jsonl";
  std::ifstream in(path);
  if (!in) return;  // a rank that writes no log
  std::string line, out;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && (mutation == "forged_overlap" || mutation == "junk_overlap") && j.contains("buckets")) {
      j["buckets_started_before_backward_end"] = j["buckets"];
      if (j.contains("comm_busy_ms")) j["comm_hidden_ms"] = j["comm_busy_ms"];
      j["comm_exposed_ms"] = 0;
    }
    if (j.is_object() && mutation == "forged_no_sync") j["no_sync_calls"] = 0;
    out += (j.is_object() ? j.dump() : line) + "\n";
  }
  in.close();
  std::ofstream(path, std::ios::trunc) << out;
}

}  // namespace

int main(int argc, char** argv) {
  // The DDP is made after the flags are parsed; the value is the flag's, read here first.
  distlm::task3::DdpMutation() = distlm::grading::FlagFromArgv(argc, argv, "--ddp_mutation", "none");
  const int code =
      distlm::train::RunStageMain(argc, argv, distlm::task3::MakeDdpStage("task3", distlm::part1::MakeTrainStep()));
  const std::string& m = distlm::task3::DdpMutation();
  const char* rank = std::getenv("RANK");  // rank 0 writes the log (tools/launch sets RANK)
  if ((m == "forged_overlap" || m == "forged_no_sync" || m == "junk_overlap") && rank != nullptr &&
      std::string(rank) == "0") {
    ForgeLog(distlm::grading::FlagFromArgv(argc, argv, "--output_dir", ""), m);
  }
  return code;
}
