// The scaling report of task 4, and the training traffic table.
//
//   bazel run //task4_bench:report -- --out=DIR [--quick]
//
// Trains each stage of the table below (tasks 2a, 2b, 3, 5: their reference solutions) on the
// tiny BERT (or --model: the tiny ViT, BERT-base, ViT-B/16 or B/32) for a few updates, on 1, 2 and 4 ranks, over loopback and (as root) over the
// emulated cluster's shaped links, and writes
//   DIR/scaling.csv   iteration time, samples/s, scaling efficiency, communication share
//   DIR/traffic.csv   per-rank bytes per update: expected (traffic.h) against observed (the
//                     interface counters), for per-rank batches 64, 32, 16 and fp32 vs fp16
//   DIR/tensors.csv   every communicated gradient: name, shape, numel, bytes
//   DIR/report.md     the tables, how to read them, how to run the same on a real cluster
//   DIR/scaling.png, DIR/traffic.png (gnuplot)
//   DIR/runs/<run>/   each run's output folder (train_log.jsonl, ...) and output.log
//
// Observed bytes. As root, the report first moves itself into a fresh network namespace, so
// its loopback interface carries the report's ranks and nothing else (not the Bazel server, not
// other jobs); the emulated cluster's bridge then lives in that namespace too. Without root it
// reads the machine's `lo`, which every process on it shares: those figures are an upper bound.
// Each traffic configuration runs twice, with U and 2U updates; the difference of the two
// runs' loopback byte counts, divided by U and by the number of ranks, is the observed traffic
// per rank per update without start-up (rendezvous, task 3's initial broadcast, the model
// save), which the expected figure does not contain either.
//
// The runs are report_runs.{h,cc}; the tables, plots and report.md report_output.{h,cc}.
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/runtime/runfiles.h"
#include "common/stages/stages.h"
#include "task4_bench/accounting.h"
#include "task4_bench/report_output.h"
#include "task4_bench/report_runs.h"

ABSL_FLAG(std::string, out, "", "folder to write the report to (created; relative to the folder you ran from)");
ABSL_FLAG(bool, quick, false,
          "a few minutes: 5 updates per scaling run, links loopback and 1gbit, traffic at 2 ranks with 2 and 4 "
          "updates");
ABSL_FLAG(std::string, ranks, "1,2,4", "world sizes of the scaling runs");
ABSL_FLAG(std::string, stages, "",
          "stages to run, comma-separated (rows of common/stages/stages.h with a traffic pattern; default: all of them)");
ABSL_FLAG(std::string, links, "",
          "link profiles: loopback and emulated-cluster rates such as 1gbit, 10gbit (default loopback,1gbit,10gbit; "
          "--quick: loopback,1gbit); rates need root");
ABSL_FLAG(int, updates, 0, "updates per scaling run (default 10; --quick: 5)");
ABSL_FLAG(int, per_rank_batch, 16, "per-rank batch of the scaling runs (weak scaling: the global batch grows with N)");
ABSL_FLAG(std::string, traffic_batches, "64,32,16", "per-rank batches of the traffic table");
ABSL_FLAG(int, traffic_ranks, 0, "world size of the traffic table (default 4; --quick: 2)");
ABSL_FLAG(int, traffic_updates, 0, "U: each traffic configuration runs U and 2U updates (default 4; --quick: 2)");
ABSL_FLAG(std::string, traffic_comm_dtypes, "fp32,fp16",
          "comm dtypes of the traffic table (fp16 and bf16 rows for stages that take --comm_dtype, at the middle batch)");
ABSL_FLAG(int, max_seq_length, 128, "sequence length of every run (BERT)");
ABSL_FLAG(std::string, model, "bert",
          "the models, comma-separated, each with its own rows: bert, the built-in tiny BERT on the built-in RTE "
          "sample; vit, the tiny ViT (32x32 images, hidden 64) on a generated CIFAR-10-format set; bert_mid (hidden "
          "384, 6 layers), bert_base, "
          "vit_b16, vit_b32: those architectures drawn at random into OUT/model_<name> (the same data; ViT images "
          "resized to 224)");
ABSL_FLAG(int, threads_per_rank, 1,
          "LibTorch threads per rank (--num_threads): 1 gives each rank one core while there are cores to give, "
          "like one rank per node; 0 = the stages' default (cores / ranks)");
ABSL_FLAG(double, run_timeout_s, 600, "a run still going after this long is stopped and reported as failed");
ABSL_FLAG(bool, private_netns, true,
          "as root, run in a fresh network namespace so that its lo carries only the report's traffic");

namespace distlm::task4_bench {
namespace {

// ------------------------------------------------------------------------------------------
// Flags.

// --stages: the rows of common/stages/stages.h that have a traffic pattern.

const StageSpec& FindStage(const std::string& name) {
  const StageSpec* s = stages::Find(name);
  if (s != nullptr && s->report.pattern != SyncPattern::kNone) return *s;
  std::vector<std::string> names;
  for (const auto& st : stages::All()) {
    if (st.report.pattern != SyncPattern::kNone) names.push_back(st.id);
  }
  throw UserError("--stages: unknown stage '" + name + "'; known: " + absl::StrJoin(names, ", "));
}

std::vector<std::string> ParseList(const std::string& value) {
  return absl::StrSplit(value, ',', absl::SkipEmpty());
}

bool IsRate(const std::string& s) {
  size_t digits = 0;
  while (digits < s.size() && (std::isdigit(static_cast<unsigned char>(s[digits])) || s[digits] == '.')) ++digits;
  const std::string unit = s.substr(digits);
  return digits > 0 && (unit == "kbit" || unit == "mbit" || unit == "gbit");
}

Config ConfigFromFlags() {
  Config c;
  c.out = absl::GetFlag(FLAGS_out);
  if (c.out.empty()) throw UserError("--out is required: the folder to write the report to");
  if (c.out[0] != '/') c.out = UserWorkingDirectory() + "/" + c.out;
  c.quick = absl::GetFlag(FLAGS_quick);
  c.ranks = ParseInts("ranks", absl::GetFlag(FLAGS_ranks), 1, 64);
  for (const auto& s : ParseList(absl::GetFlag(FLAGS_stages))) c.stages.push_back(&FindStage(s));
  if (c.stages.empty()) {
    for (const auto& st : stages::All()) {
      if (st.report.pattern != SyncPattern::kNone) c.stages.push_back(&st);
    }
  }
  std::string links = absl::GetFlag(FLAGS_links);
  if (links.empty()) links = c.quick ? "loopback,1gbit" : "loopback,1gbit,10gbit";
  c.links = ParseList(links);
  for (const auto& l : c.links) {
    if (l != "loopback" && !IsRate(l)) {
      throw UserError("--links: '" + l + "' is neither loopback nor a rate such as 100mbit, 1gbit, 10gbit");
    }
  }
  c.updates = absl::GetFlag(FLAGS_updates) > 0 ? absl::GetFlag(FLAGS_updates) : (c.quick ? 5 : 10);
  c.per_rank_batch = absl::GetFlag(FLAGS_per_rank_batch);
  if (c.per_rank_batch < 1) throw UserError("--per_rank_batch must be at least 1");
  c.traffic_batches = ParseInts("traffic_batches", absl::GetFlag(FLAGS_traffic_batches), 1, 4096);
  c.traffic_ranks = absl::GetFlag(FLAGS_traffic_ranks) > 0 ? absl::GetFlag(FLAGS_traffic_ranks) : (c.quick ? 2 : 4);
  if (c.traffic_ranks < 2) throw UserError("--traffic_ranks must be at least 2 (one rank sends nothing)");
  c.traffic_updates =
      absl::GetFlag(FLAGS_traffic_updates) > 0 ? absl::GetFlag(FLAGS_traffic_updates) : (c.quick ? 2 : 4);
  c.traffic_comm_dtypes = ParseList(absl::GetFlag(FLAGS_traffic_comm_dtypes));
  for (const auto& d : c.traffic_comm_dtypes) CommDtypeBytes(d);
  c.max_seq_length = absl::GetFlag(FLAGS_max_seq_length);
  if (c.max_seq_length < 8 || c.max_seq_length > 512) throw UserError("--max_seq_length must be in 8..512");
  c.models = ParseList(absl::GetFlag(FLAGS_model));
  if (c.models.empty()) throw UserError("--model is empty");
  for (const auto& m : c.models) {
    if (!IsReportModel(m)) throw UserError("--model: '" + m + "' is not one of " + ReportModelNames());
  }
  c.threads_per_rank = absl::GetFlag(FLAGS_threads_per_rank);
  if (c.threads_per_rank < 0 || c.threads_per_rank > 256) throw UserError("--threads_per_rank must be in 0..256");
  c.run_timeout_s = absl::GetFlag(FLAGS_run_timeout_s);
  if (!(c.run_timeout_s > 0)) throw UserError("--run_timeout_s must be positive");
  return c;
}

bool CanEmulateLinks(std::string* why) {
  if (geteuid() != 0) {
    *why = "Emulated links: skipped: needs root (ip netns, tc); only loopback was measured.";
    return false;
  }
  if (system("ip netns list >/dev/null 2>&1") != 0 || system("command -v tc >/dev/null 2>&1") != 0) {
    *why = "Emulated links: skipped: `ip netns` or `tc` does not work here; only loopback was measured.";
    return false;
  }
  *why =
      "Emulated links: `task4_bench/cluster/emulated_cluster run N --rate=R`: one network namespace per rank on a "
      "bridge, each node's link shaped with tc tbf to R in both directions. No delay is added (--delay adds it: "
      "netem, or on kernels without netem each packet held in user space), so the links have a rate but "
      "loopback-like latency.";
  return true;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage("distlm task4_bench report: the scaling report, bazel run //task4_bench:report -- --out=DIR [--quick]");
  auto rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) throw UserError("unexpected argument '" + std::string(rest[1]) + "' (flags are --name=value)");
  Env env;
  env.config = ConfigFromFlags();
  const Config& c = env.config;
  std::string command = "bazel run //task4_bench:report --";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];

  // Before any thread exists: a private network namespace, so lo counts only our runs.
  if (absl::GetFlag(FLAGS_private_netns) && geteuid() == 0) {
    if (unshare(CLONE_NEWNET) == 0 && system("ip link set lo up") == 0) {
      env.private_netns = true;
    } else {
      std::printf("report: could not make a private network namespace; measuring the shared lo\n");
    }
  }
  MakeDirs(c.out);
  for (const std::string& name : c.models) {
    env.models.push_back(MakeReportModel(c, name));
    env.models.back().data_dir = MakeDataDir(c, env.models.back());
  }
  env.launch = FindRunfile("tools/launch");
  env.cluster = FindRunfile("task4_bench/cluster/emulated_cluster");
  bool wants_links = false;
  for (const auto& l : c.links) wants_links = wants_links || l != "loopback";
  env.links_possible = wants_links && CanEmulateLinks(&env.links_note);
  if (!wants_links) env.links_note = "Emulated links: none requested (--links).";
  std::printf("report: writing %s%s\nreport: %s\n", c.out.c_str(),
              env.private_netns ? " (in a private network namespace)" : "", env.links_note.c_str());

  WriteFileAtomically(c.out + "/tensors.csv", TensorsCsv(env.models));

  std::vector<TrafficRow> traffic;
  const int middle_batch = c.traffic_batches[c.traffic_batches.size() / 2];
  for (const ReportModel& model : env.models) {
    for (const StageSpec* stage : c.stages) {
      for (int b : c.traffic_batches) traffic.push_back(MeasureTraffic(env, model, stage, b, "fp32"));
    }
    for (const std::string& dtype : c.traffic_comm_dtypes) {
      if (dtype == "fp32") continue;
      for (const StageSpec* stage : c.stages) {
        if (stage->takes_comm_dtype) traffic.push_back(MeasureTraffic(env, model, stage, middle_batch, dtype));
      }
    }
  }
  CompareLosses(traffic);
  WriteFileAtomically(c.out + "/traffic.csv", TrafficCsv(traffic));

  std::vector<ScalingRow> scaling = RunScaling(env);
  WriteFileAtomically(c.out + "/scaling.csv", ScalingCsv(scaling));

  const std::string plot_note = Plot(env, scaling, traffic);
  if (!plot_note.empty()) std::printf("report: %s\n", plot_note.c_str());
  WriteFileAtomically(c.out + "/report.md", Markdown(env, scaling, traffic, plot_note, command));
  int failed = 0;
  for (const auto& r : scaling) failed += r.result.ok ? 0 : 1;
  for (const auto& r : traffic) failed += r.ok ? 0 : 1;
  std::printf("report: %s/report.md written (%d run(s) failed)\n", c.out.c_str(), failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace distlm::task4_bench

int main(int argc, char** argv) {
  return distlm::RunMain([&] { return distlm::task4_bench::Main(argc, argv); });
}
