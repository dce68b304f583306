// //grading:mutant_stage -- a distributed stage with a deliberately wrong gradient
// synchronisation, chosen by --mutation. The grading suite checks that the grader catches each
// one with a message that tells a student what went wrong, and the autograder runs the same
// mutants to recognise a submission's mistake by its trace (grading/README.md).
//
// Grader-private: its "none" mode is a correct synchronisation, so the student kit leaves the
// whole grading/ folder out.
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "common/dist/counting_process_group.h"
#include "common/runtime/errors.h"
#include "common/train/bert_adamw.h"
#include "common/train/distributed.h"
#include "common/train/run_stage.h"
#include "grading/mutation_flag.h"
#include "part1/train_step.h"
#include "task7/schedule_probe.h"
#include "common/stages/gradient_sync_stage.h"

ABSL_FLAG(std::string, mutation, "none",
          "none (a correct all_reduce average); the mistakes: no_sync, sum_without_average, "
          "some_params_only, rank0_keeps_own, sync_after_step, same_data; task 2a's (gather and "
          "scatter): root_only_average, scatter_sum; the failures: "
          "deadlock, hang, crash, memory_hog (task 5's own: task5/grading/mutant_stage); the "
          "forgeries: trains_alone, trains_alone_in_shares, whole_batch (any layout, task 7's too), "
          "trains_alone_hidden (trains_alone on a second thread, the first ended)");

namespace {

using distlm::train::StageContext;

void AllreduceSum(c10d::ProcessGroup& pg, const torch::Tensor& t) {
  std::vector<torch::Tensor> v = {t};
  pg.allreduce(v)->wait();
}

// A correct average, the building block of most mistakes.
void Average(c10d::ProcessGroup& pg, const torch::Tensor& grad) {
  AllreduceSum(pg, grad);
  grad.div_(pg.getSize());
}

// Task 2a's shape, one parameter at a time: the sum of every rank's `grad` on rank 0 (undefined
// on the others).
torch::Tensor SumOnRoot(c10d::ProcessGroup& pg, const torch::Tensor& grad) {
  std::vector<std::vector<torch::Tensor>> into(pg.getRank() == 0 ? 1 : 0);
  for (auto& v : into) {
    for (int r = 0; r < pg.getSize(); ++r) v.push_back(torch::empty_like(grad));
  }
  std::vector<torch::Tensor> mine = {grad};
  pg.gather(into, mine, c10d::GatherOptions{})->wait();
  return into.empty() ? torch::Tensor() : torch::stack(into[0]).sum(0);
}

// Rank 0's `value` into every rank's `grad`.
void FromRoot(c10d::ProcessGroup& pg, const torch::Tensor& value, const torch::Tensor& grad) {
  std::vector<std::vector<torch::Tensor>> from;
  if (pg.getRank() == 0) from.emplace_back(pg.getSize(), value);
  std::vector<torch::Tensor> into = {grad};
  pg.scatter(into, from, c10d::ScatterOptions{})->wait();
}

// Every mutation that lives inside the gradient-synchronisation hook.
void Sync(const std::string& m, c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& params) {
  if (m == "no_sync") return;
  if (m == "trains_alone" || m == "trains_alone_in_shares" || m == "whole_batch") {
    // Every rank already holds the whole batch's gradient (see ForgedArgs): nothing to
    // synchronise, and an all_reduce of copies puts on the network what a real one would;
    // whole_batch sends 8 times that, more than any layout of the grader's sends.
    for (int i = 0; i < (m == "whole_batch" ? 8 : 1); ++i) {
      for (const auto& p : params) AllreduceSum(pg, p.grad().clone());
    }
    return;
  }
  if (m == "root_only_average") {
    // Task 2a without its scatter: rank 0 averages, the others keep their own gradients.
    for (const auto& p : params) {
      torch::Tensor sum = SumOnRoot(pg, p.grad());
      if (sum.defined()) p.grad().copy_(sum.div_(pg.getSize()));
    }
    return;
  }
  if (m == "scatter_sum") {
    // Task 2a's gather and scatter around a sum that is never divided.
    for (const auto& p : params) FromRoot(pg, SumOnRoot(pg, p.grad()), p.grad());
    return;
  }
  if (m == "sum_without_average") {
    for (const auto& p : params) AllreduceSum(pg, p.grad());
    return;
  }
  if (m == "some_params_only") {
    // The first half (embeddings and the lower layers) averaged, the rest left local: what a
    // loop that stops early, or skips what it thinks does not matter, does.
    for (size_t i = 0; i < params.size() / 2; ++i) Average(pg, params[i].grad());
    return;
  }
  if (m == "rank0_keeps_own") {
    // Every rank takes part in the all_reduce, but rank 0 writes the average into a copy and
    // keeps training on its own gradient (an `if (rank != 0)` around the copy-back).
    for (const auto& p : params) {
      torch::Tensor sum = p.grad().clone();
      AllreduceSum(pg, sum);
      if (pg.getRank() != 0) p.grad().copy_(sum.div_(pg.getSize()));
    }
    return;
  }
  if (m == "deadlock") {
    // Only rank 0 calls the collective: the others go on to the next collective of the
    // loop, which never matches, so everybody waits.
    if (pg.getRank() == 0) {
      for (const auto& p : params) Average(pg, p.grad());
    }
    return;
  }
  if (m == "hang") {
    // Rank 0 never arrives; the others wait for it in their first all_reduce.
    if (pg.getRank() == 0) {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
  if (m == "crash") {
    if (pg.getRank() == 1) std::raise(SIGSEGV);
  }
  if (m == "memory_hog") {
    // Asks for as much memory as the address-space limit allows in all, so it fails at once
    // under a limit (what the grader sets); without one it refuses rather than eat the machine.
    rlimit lim{};
    if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) {
      throw distlm::UserError("--mutation=memory_hog runs only under an address-space limit (ulimit -v)");
    }
    torch::Tensor hog = torch::ones({static_cast<int64_t>(lim.rlim_cur / 4)}, torch::kFloat32);
    params[0].grad().add_(hog.narrow(0, 0, 1).sum());
  }
  for (const auto& p : params) Average(pg, p.grad());
}

// Task 2b's stage with the mutation in its synchronisation; sync_after_step moves it after the
// optimizer step, same_data drops the distributed sampler. What it sends is counted by
// GradientSyncStage, as for a real submission, so a mutant's log looks like one.
class MutantStage : public distlm::stages::GradientSyncStage {
 public:
  explicit MutantStage(const std::string& mutation)
      : GradientSyncStage("mutant", distlm::part1::MakeTrainStep(),
                          [m = mutation == "same_data" || mutation == "sync_after_step" ? "none" : mutation](
                              c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& params) { Sync(m, pg, params); }),
        mutation_(mutation) {}

  void BeforeTraining(const StageContext& ctx) override {
    if (absl::GetFlag(FLAGS_mutation) != mutation_) {
      throw distlm::UserError("--mutation: could not read its value before the flags were parsed");
    }
    GradientSyncStage::BeforeTraining(ctx);
  }
  void SyncGradients(const StageContext& ctx) override {
    if (mutation_ != "sync_after_step") GradientSyncStage::SyncGradients(ctx);
  }
  // sync_after_step: clip and step on the local gradients, then average them (too late: the
  // parameters have already moved), then clear them. Numerically every rank trains on its own
  // gradients, as with no_sync, but the log shows a full synchronisation.
  double OptimizerStep(const StageContext& ctx, distlm::train::UpdateContext& u) override {
    if (mutation_ != "sync_after_step") return GradientSyncStage::OptimizerStep(ctx, u);
    const double norm = distlm::train::ClipGradNorm(u.parameters, u.max_grad_norm);
    u.optimizer.Step();
    u.optimizer.set_lr(u.schedule.Step());
    GradientSyncStage::SyncGradients(ctx);
    u.optimizer.ZeroGrad();
    return norm;
  }
  DataShare data_share(const distlm::train::DistInfo& dist) const override {
    return mutation_ == "same_data" || TrainsAlone() ? DataShare{1, 0} : Stage::data_share(dist);
  }

 private:
  bool TrainsAlone() const {
    return mutation_ == "trains_alone" || mutation_ == "trains_alone_in_shares" || mutation_ == "whole_batch";
  }
  std::string mutation_;
};

// The forgeries of a data-parallel run that no trace, final weight or byte count can tell from
// the real thing (grading/share_check.h): every rank trains the whole batch, with the grader's
// single-node numbers, and pads the network. trains_alone takes the whole batch at once (its
// --per_gpu_train_batch_size times the world size); trains_alone_in_shares a share at a time
// (its own batch, --gradient_accumulation_steps the world size), which holds no more memory than
// a real rank. whole_batch stands in for any stage, task 7's layouts too: the grader's whole
// batch of 8 at once on every rank, the model-parallel flags dropped. A submission could do the
// same from inside its stage; here the flags say it.
std::vector<std::string> ForgedArgs(int argc, char** argv, const std::string& mutation) {
  std::vector<std::string> args(argv, argv + argc);
  const char* world = std::getenv("WORLD_SIZE");
  const int64_t w = world == nullptr ? 1 : std::max(1L, std::atol(world));
  const std::string batch_flag = "--per_gpu_train_batch_size=";
  if (mutation == "whole_batch") {
    std::vector<std::string> kept;
    for (const std::string& a : args) {
      bool model_parallel = false;
      for (const char* f : {"--model_parallel=", "--tensor_parallel_size=", "--pipeline_parallel_size=",
                            "--pipeline_schedule=", "--micro_batches="}) {
        model_parallel = model_parallel || a.rfind(f, 0) == 0;
      }
      if (!model_parallel) kept.push_back(a.rfind(batch_flag, 0) == 0 ? batch_flag + "8" : a);
    }
    return kept;
  }
  if (mutation != "trains_alone" && mutation != "trains_alone_in_shares") return args;
  if (mutation == "trains_alone_in_shares") {
    args.push_back("--gradient_accumulation_steps=" + std::to_string(w));
    return args;
  }
  for (std::string& a : args) {
    if (a.rfind(batch_flag, 0) == 0) a = batch_flag + std::to_string(std::atol(a.c_str() + batch_flag.size()) * w);
  }
  return args;
}

// What whole_batch's log claims for task 7b: every line says 1F1B's in-flight peak of 2.
void ClaimOneFOneB(const std::string& output_dir) {
  const std::string path = output_dir + "/train_log.jsonl";
  std::ifstream in(path);
  std::string line, claimed;
  while (std::getline(in, line)) {
    claimed += (line.rfind("{", 0) == 0 ? "{\"pipeline_in_flight_peak\":2," + line.substr(1) : line) + "\n";
  }
  in.close();
  std::ofstream(path, std::ios::trunc) << claimed;
}

int Main(int argc, char** argv);

// trains_alone_hidden: trains_alone run on a second thread while the first ends (pthread_exit),
// as a student's own __libc_start_main can arrange before main. The process's first thread then
// stays a zombie, without memory or a program of its own in /proc: a watch that reads only it
// sees the rank gone at once, and the forgery's figures vanish.
int HiddenFromTheWatch(int argc, char** argv) {
  static std::vector<std::string> args;
  static std::vector<char*> argv2;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    args.push_back(a == "--mutation=trains_alone_hidden" ? "--mutation=trains_alone" : a);
  }
  for (std::string& a : args) argv2.push_back(a.data());
  argv2.push_back(nullptr);
  std::thread([] { std::exit(Main(static_cast<int>(args.size()), argv2.data())); }).detach();
  pthread_exit(nullptr);
}

int Main(int argc, char** argv) {
  // Graded as task 7, it answers the grader's call of StageSteps as a task 7 binary does (with
  // the reference's schedules): what it forges is the training, not the schedule.
  if (int code = 0; distlm::task7::RunScheduleProbeIfAsked(argc, argv, &distlm::task7::StageSteps, &code)) {
    return code;
  }
  // It picks the stage's class, before RunStageMain parses the flags (BeforeTraining checks that
  // absl parsed the same value).
  const std::string mutation = distlm::grading::FlagFromArgv(argc, argv, "--mutation", "none");
  if (mutation == "trains_alone_hidden") return HiddenFromTheWatch(argc, argv);
  static const char* const kKnown[] = {"none",          "no_sync",           "sum_without_average",
                                       "some_params_only", "rank0_keeps_own",   "sync_after_step",
                                       "same_data",     "root_only_average", "scatter_sum",
                                       "deadlock",      "hang",              "crash",
                                       "memory_hog",    "trains_alone",      "trains_alone_in_shares",
                                       "whole_batch",   "trains_alone_hidden"};
  bool known = false;
  std::string names;
  for (const char* k : kKnown) {
    known = known || mutation == k;
    names += std::string(names.empty() ? "" : ", ") + k;
  }
  if (!known) {
    return distlm::RunMain([&]() -> int { throw distlm::UserError("--mutation=" + mutation + " is not one of " + names); });
  }
  MutantStage stage(mutation);
  std::vector<std::string> args = ForgedArgs(argc, argv, mutation);
  std::vector<char*> forged;
  for (std::string& a : args) forged.push_back(a.data());
  forged.push_back(nullptr);
  const int code = distlm::train::RunStageMain(static_cast<int>(args.size()), forged.data(), stage);
  const char* rank = std::getenv("RANK");
  if (mutation == "whole_batch" && (rank == nullptr || std::string(rank) == "0")) {
    ClaimOneFOneB(distlm::grading::FlagFromArgv(argc, argv, "--output_dir", "."));
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
