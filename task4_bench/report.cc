// The scaling report of task 4 (issue #8, item 4), and the training traffic table (item 2).
//
//   bazel run //task4_bench:report -- --out=DIR [--quick]
//
// Trains each stage of the table below (tasks 2a, 2b, 3, 5: their reference solutions) on the
// tiny BERT for a few updates, on 1, 2 and 4 ranks, over loopback and (as root) over the
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
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/bert/bert_config.h"
#include "common/vit/vit_model.h"
#include "common/runtime/atomic_file.h"
#include "common/train/plots.h"
#include "common/runtime/errors.h"
#include "common/runtime/runfiles.h"
#include "task4_bench/accounting.h"
#include "task4_bench/traffic.h"

ABSL_FLAG(std::string, out, "", "folder to write the report to (created; relative to the folder you ran from)");
ABSL_FLAG(bool, quick, false,
          "a few minutes: 5 updates per scaling run, links loopback and 1gbit, traffic at 2 ranks with 2 and 4 "
          "updates");
ABSL_FLAG(std::string, ranks, "1,2,4", "world sizes of the scaling runs");
ABSL_FLAG(std::string, stages, "task2a,task2b,task3,task5", "stages to run (rows of common/stages/stages.h with a traffic pattern)");
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
          "bert: the built-in tiny BERT on the built-in RTE sample; vit: the tiny ViT (32x32 images, hidden 64) "
          "on a generated CIFAR-10-format set");
ABSL_FLAG(int, threads_per_rank, 1,
          "LibTorch threads per rank (--num_threads): 1 gives each rank one core while there are cores to give, "
          "like one rank per node; 0 = the stages' default (cores / ranks)");
ABSL_FLAG(double, run_timeout_s, 600, "a run still going after this long is stopped and reported as failed");
ABSL_FLAG(bool, private_netns, true,
          "as root, run in a fresh network namespace so that its lo carries only the report's traffic");

namespace distlm::task4_bench {
namespace {

using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------------------------------
// The stages: the rows of common/stages/stages.h that have a traffic pattern.

using StageSpec = stages::Stage;

const StageSpec& FindStage(const std::string& name) {
  const StageSpec* s = stages::Find(name);
  if (s != nullptr && s->report.pattern != SyncPattern::kNone) return *s;
  std::vector<std::string> names;
  for (const auto& st : stages::All()) {
    if (st.report.pattern != SyncPattern::kNone) names.push_back(st.id);
  }
  throw UserError("--stages: unknown stage '" + name + "'; known: " + absl::StrJoin(names, ", "));
}

std::string PatternName(SyncPattern p) {
  switch (p) {
    case SyncPattern::kNone:
      return "none";
    case SyncPattern::kRingAllreduce:
      return "ring all_reduce";
    case SyncPattern::kGatherScatter:
      return "gather + scatter";
    case SyncPattern::kReduceScatterAllGather:
      return "reduce-scatter + all-gather";
    case SyncPattern::kAllreduceAllGather:
      return "all_reduce + slice + all-gather";
  }
  return "?";
}

// Elements a stage communicates for a model of `numel` parameters at world size N: task 5's
// flat buffer is padded to N equal shards.
int64_t CommunicatedNumel(const StageSpec& stage, int64_t numel, int world_size) {
  if (!IsSharded(stage.report.pattern)) return numel;
  return (numel + world_size - 1) / world_size * world_size;
}

// ------------------------------------------------------------------------------------------
// Flags.

std::vector<int> ParseInts(const std::string& flag, const std::string& value, int lo, int hi) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < lo || v > hi) {
      throw UserError("--" + flag + "=" + value + ": '" + std::string(part) + "' is not a whole number in " +
                      std::to_string(lo) + ".." + std::to_string(hi));
    }
    out.push_back(v);
  }
  if (out.empty()) throw UserError("--" + flag + " is empty");
  return out;
}

std::vector<std::string> ParseList(const std::string& value) {
  return absl::StrSplit(value, ',', absl::SkipEmpty());
}

struct Config {
  std::string out;
  bool quick = false;
  std::vector<int> ranks;
  std::vector<const StageSpec*> stages;
  std::vector<std::string> links;  // "loopback" or a tc rate
  int updates = 10;
  int per_rank_batch = 16;
  std::vector<int> traffic_batches;
  int traffic_ranks = 4;
  int traffic_updates = 4;
  std::vector<std::string> traffic_comm_dtypes;
  int max_seq_length = 128;
  std::string model = "bert";  // or "vit"
  int threads_per_rank = 1;
  double run_timeout_s = 600;
};

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
  if (c.stages.empty()) throw UserError("--stages is empty");
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
  c.model = absl::GetFlag(FLAGS_model);
  if (c.model != "bert" && c.model != "vit") throw UserError("--model must be bert or vit, got '" + c.model + "'");
  c.threads_per_rank = absl::GetFlag(FLAGS_threads_per_rank);
  if (c.threads_per_rank < 0 || c.threads_per_rank > 256) throw UserError("--threads_per_rank must be in 0..256");
  c.run_timeout_s = absl::GetFlag(FLAGS_run_timeout_s);
  if (!(c.run_timeout_s > 0)) throw UserError("--run_timeout_s must be positive");
  return c;
}

// ------------------------------------------------------------------------------------------
// Processes.

// Runs argv with its stdout and stderr in log_path, in its own process group; past the
// deadline the group gets SIGTERM (the emulated cluster then tears down), then SIGKILL.
// Returns the exit status (128 + signal when killed), or -1 on timeout.
int RunLogged(const std::vector<std::string>& argv, const std::string& log_path, double timeout_s) {
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "error: cannot run %s\n", args[0]);
    _exit(127);
  }
  setpgid(pid, pid);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  auto term_sent = Clock::time_point::max();
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (timed_out) return -1;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    const auto now = Clock::now();
    if (!timed_out && now > deadline) {
      timed_out = true;
      kill(-pid, SIGTERM);
      term_sent = now;
    } else if (timed_out && now > term_sent + std::chrono::seconds(10)) {
      kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The last line of a file that starts with "error: " (or the last line at all).
std::string ErrorLine(const std::string& log_path) {
  std::string text = PathExists(log_path) ? ReadFile(log_path) : "";
  std::istringstream lines(text);
  std::string last, error;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    last = line;
    size_t e = line.find("error: ");
    if (e != std::string::npos) error = line.substr(e);
  }
  return error.empty() ? last : error;
}

// ------------------------------------------------------------------------------------------
// Runs.

struct RunSpec {
  const StageSpec* stage = nullptr;
  int ranks = 1;
  std::string link = "loopback";
  int batch = 16;
  int updates = 5;
  std::string comm_dtype = "fp32";
  std::string Id() const {
    return absl::StrFormat("%s_n%d_%s_b%d_u%d_%s", stage->id, ranks, link, batch, updates, comm_dtype);
  }
};

struct RunResult {
  bool ok = false;
  std::string error;
  LogSummary log;
  InterfaceCounters lo_before, lo_after;
  double wall_s = 0;
  std::string dir;
};

struct Env {
  Config config;
  std::string data_dir;
  std::string launch;
  std::string cluster;
  bool private_netns = false;
  bool links_possible = false;
  std::string links_note;  // why rates are skipped, if they are
};

RunResult Train(const Env& env, const RunSpec& spec) {
  RunResult res;
  res.dir = env.config.out + "/runs/" + spec.Id();
  MakeDirs(res.dir);
  const std::string binary = FindRunfile(spec.stage->reference_binary());
  std::vector<std::string> stage_flags = {"--per_gpu_train_batch_size=" + std::to_string(spec.batch),
                                          "--max_steps=" + std::to_string(spec.updates),
                                          "--data_dir=" + env.data_dir,
                                          "--do_eval=false",
                                          "--output_dir=" + res.dir,
                                          "--overwrite_output_dir"};
  if (env.config.model == "vit") {
    stage_flags.insert(stage_flags.end(), {"--model_type=vit", "--task_name=cifar10"});
  } else {
    stage_flags.push_back("--max_seq_length=" + std::to_string(env.config.max_seq_length));
  }
  if (spec.stage->takes_comm_dtype) stage_flags.push_back("--comm_dtype=" + spec.comm_dtype);
  if (env.config.threads_per_rank > 0) stage_flags.push_back("--num_threads=" + std::to_string(env.config.threads_per_rank));
  std::vector<std::string> argv;
  if (spec.link == "loopback") {
    argv = {env.launch, "--nproc_per_node=" + std::to_string(spec.ranks),
            "--timeout_s=" + std::to_string(static_cast<int>(env.config.run_timeout_s)), "--", binary};
  } else {
    argv = {env.cluster, "run", std::to_string(spec.ranks), "--rate=" + spec.link, "--", binary,
            "--gloo_iface=distlm0"};
  }
  argv.insert(argv.end(), stage_flags.begin(), stage_flags.end());
  std::printf("report: %-44s ", spec.Id().c_str());
  std::fflush(stdout);
  res.lo_before = ReadInterfaceCounters("lo");
  auto start = Clock::now();
  const std::string log_path = res.dir + "/output.log";
  int code = RunLogged(argv, log_path, env.config.run_timeout_s + 30);
  res.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  res.lo_after = ReadInterfaceCounters("lo");
  if (code != 0) {
    res.error = code == -1 ? "timed out after " + std::to_string(env.config.run_timeout_s) + " s"
                           : "exit " + std::to_string(code) + ": " + ErrorLine(log_path);
  } else {
    try {
      res.log = SummarizeTrainLog(ReadFile(res.dir + "/train_log.jsonl"), res.dir + "/train_log.jsonl");
      res.ok = true;
    } catch (const std::exception& e) {
      res.error = e.what();
    }
  }
  if (res.ok) {
    std::printf("%6.1f s  %8.1f ms/update  %7.1f samples/s\n", res.wall_s, res.log.step_ms, res.log.samples_per_s);
  } else {
    std::printf("FAILED (%s; see %s)\n", res.error.c_str(), log_path.c_str());
  }
  std::fflush(stdout);
  return res;
}

// The built-in RTE-style sample, repeated (indices renumbered) until every rank of every run
// trains inside its first epoch.
// The ViT's data: a generated CIFAR-10-format set large enough that every run stays inside its
// first epoch (see below).
std::string MakeImageDir(const Config& c, size_t needed) {
  const std::string dir = c.out + "/data_cifar";
  const int per_class = static_cast<int>((needed + 9) / 10);
  MakeDirs(c.out);
  const std::vector<std::string> argv = {FindRunfile("common/vision/make_sample_cifar10"), "--out=" + dir,
                                         "--train_per_class=" + std::to_string(per_class), "--test_per_class=1"};
  if (RunLogged(argv, c.out + "/data_cifar.log", 120) != 0) {
    throw UserError("could not write the CIFAR-10-format set into " + dir + " (see " + c.out + "/data_cifar.log)");
  }
  return dir;
}

std::string MakeDataDir(const Config& c) {
  const std::string dir = c.out + "/data";
  MakeDirs(dir);
  const std::string train = ReadFile(FindRunfile("common/testdata/rte/train.tsv"));
  std::vector<std::string> rows;
  std::istringstream lines(train);
  std::string header;
  std::getline(lines, header);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) rows.push_back(line.substr(line.find('\t')));  // without the index
  }
  int max_batch = std::max(c.per_rank_batch, *std::max_element(c.traffic_batches.begin(), c.traffic_batches.end()));
  int max_ranks = std::max(c.traffic_ranks, *std::max_element(c.ranks.begin(), c.ranks.end()));
  // Every run stays inside its first epoch: an epoch's end adds a snapshot (task 5 gathers its
  // optimizer-state shards for it) that one run of a traffic pair would have and the other not.
  const int max_updates = std::max(c.updates, 2 * c.traffic_updates) + 1;
  const size_t needed = static_cast<size_t>(max_batch) * max_ranks * max_updates;
  if (c.model == "vit") return MakeImageDir(c, needed);
  std::string out = header + "\n";
  size_t n = 0;
  while (n < needed || n % rows.size() != 0) {
    out += std::to_string(n) + rows[n % rows.size()] + "\n";
    ++n;
  }
  WriteFileAtomically(dir + "/train.tsv", out);
  WriteFileAtomically(dir + "/dev.tsv", ReadFile(FindRunfile("common/testdata/rte/dev.tsv")));
  return dir;
}

// ------------------------------------------------------------------------------------------
// Scaling.

struct ScalingRow {
  RunSpec spec;
  RunResult result;
  double efficiency = 0;
  bool baseline_from_loopback = false;
};

std::vector<ScalingRow> RunScaling(const Env& env) {
  const Config& c = env.config;
  std::vector<ScalingRow> rows;
  for (const StageSpec* stage : c.stages) {
    std::map<std::string, double> throughput_1;  // per link
    for (const std::string& link : c.links) {
      if (link != "loopback" && !env.links_possible) continue;
      for (int n : c.ranks) {
        ScalingRow row;
        row.spec = {stage, n, link, c.per_rank_batch, c.updates, "fp32"};
        if (n == 1 && link != "loopback" && throughput_1.count("loopback")) {
          // One rank sends nothing: its link does not matter; the loopback run is the baseline.
          continue;
        }
        row.result = Train(env, row.spec);
        if (row.result.ok && n == 1) throughput_1[link] = row.result.log.samples_per_s;
        rows.push_back(row);
      }
    }
    for (auto& row : rows) {
      if (row.spec.stage != stage || !row.result.ok) continue;
      auto it = throughput_1.find(row.spec.link);
      if (it == throughput_1.end()) {
        it = throughput_1.find("loopback");
        row.baseline_from_loopback = true;
      }
      if (it != throughput_1.end()) {
        row.efficiency = ScalingEfficiency(row.result.log.samples_per_s, row.spec.ranks, it->second);
      }
    }
  }
  return rows;
}

// ------------------------------------------------------------------------------------------
// Traffic.

struct TrafficRow {
  const StageSpec* stage = nullptr;
  int ranks = 0;
  int batch = 0;
  std::string comm_dtype;
  int updates = 0;  // U; the runs had U and 2U
  bool ok = false;
  std::string error;
  int64_t tensors = 0;
  double gradient_bytes = 0;    // S in the comm dtype
  int64_t comm_bytes_logged = 0;
  int64_t comm_calls_logged = 0;
  ExpectedUpdateTraffic expected;
  double observed_bytes = 0;    // per rank per update
  double observed_packets = 0;  // per rank per update
  double observed_run_bytes = 0;  // per rank, the whole 2U run (start-up included)
  double step_ms = 0;
  int64_t rte_updates_per_epoch = 0;
  std::vector<double> losses;       // of the 2U run
  double loss_rel_diff_vs_fp32 = -1;  // largest, over the 2U updates; -1: not compared
};

// For each narrow-dtype row, the largest relative loss difference from the fp32 row of the same
// stage and batch (the same data and seed, so only the rounding differs).
void CompareLosses(std::vector<TrafficRow>& rows) {
  for (auto& r : rows) {
    if (!r.ok || r.comm_dtype == "fp32") continue;
    for (const auto& base : rows) {
      if (!base.ok || base.comm_dtype != "fp32" || base.stage != r.stage || base.batch != r.batch ||
          base.losses.size() != r.losses.size()) {
        continue;
      }
      r.loss_rel_diff_vs_fp32 = 0;
      for (size_t i = 0; i < r.losses.size(); ++i) {
        r.loss_rel_diff_vs_fp32 =
            std::max(r.loss_rel_diff_vs_fp32, std::abs(r.losses[i] - base.losses[i]) / std::abs(base.losses[i]));
      }
    }
  }
}

constexpr int64_t kRteTrainExamples = 2490;

TrafficRow MeasureTraffic(const Env& env, const StageSpec* stage, int batch, const std::string& comm_dtype,
                          int64_t gradient_numel) {
  const Config& c = env.config;
  TrafficRow row;
  row.stage = stage;
  row.ranks = c.traffic_ranks;
  row.batch = batch;
  row.comm_dtype = comm_dtype;
  row.updates = c.traffic_updates;
  RunSpec shorter{stage, c.traffic_ranks, "loopback", batch, c.traffic_updates, comm_dtype};
  RunSpec longer = shorter;
  longer.updates = 2 * c.traffic_updates;
  RunResult a = Train(env, shorter);
  RunResult b = a.ok ? Train(env, longer) : RunResult{};
  if (!a.ok || !b.ok) {
    row.error = a.ok ? b.error : a.error;
    return row;
  }
  row.ok = true;
  row.gradient_bytes =
      static_cast<double>(CommunicatedNumel(*stage, gradient_numel, c.traffic_ranks)) * CommDtypeBytes(comm_dtype);
  row.tensors = b.log.comm_tensors;
  row.comm_bytes_logged = b.log.comm_bytes;
  row.comm_calls_logged = b.log.comm_calls;
  row.expected = ExpectedTrafficPerUpdate(stage->report.pattern, row.gradient_bytes, c.traffic_ranks);
  // On loopback every byte a rank sends is counted once in lo's tx (and once in its rx).
  const double tx_a = static_cast<double>(a.lo_after.tx_bytes - a.lo_before.tx_bytes);
  const double tx_b = static_cast<double>(b.lo_after.tx_bytes - b.lo_before.tx_bytes);
  const double pk_a = static_cast<double>(a.lo_after.tx_packets - a.lo_before.tx_packets);
  const double pk_b = static_cast<double>(b.lo_after.tx_packets - b.lo_before.tx_packets);
  row.observed_bytes = (tx_b - tx_a) / c.traffic_updates / c.traffic_ranks;
  row.observed_packets = (pk_b - pk_a) / c.traffic_updates / c.traffic_ranks;
  row.observed_run_bytes = tx_b / c.traffic_ranks;
  row.step_ms = b.log.step_ms;
  row.losses = b.log.losses;
  const int64_t per_rank = (kRteTrainExamples + c.traffic_ranks - 1) / c.traffic_ranks;
  row.rte_updates_per_epoch = (per_rank + batch - 1) / batch;
  return row;
}

// ------------------------------------------------------------------------------------------
// Output.

std::string Mb(double bytes) { return absl::StrFormat("%.3f", bytes / 1e6); }

// AdamW's two float32 moments on rank 0: what task 5's log says, else the whole model's (8 x P).
int64_t OptStateBytes(const ScalingRow& r, int64_t model_numel) {
  return r.result.log.opt_state_bytes >= 0 ? r.result.log.opt_state_bytes : 8 * model_numel;
}

std::string ScalingCsv(const std::vector<ScalingRow>& rows, int64_t model_numel) {
  std::string out =
      "stage,link,ranks,per_rank_batch,updates,ok,iteration_ms,comm_ms,samples_per_s,scaling_efficiency,comm_share,"
      "comm_bytes_per_update,opt_state_bytes_per_rank,error\n";
  for (const auto& r : rows) {
    const LogSummary& l = r.result.log;
    out += absl::StrFormat("%s,%s,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.4f,%.4f,%d,%d,\"%s\"\n", r.spec.stage->id,
                           r.spec.link, r.spec.ranks, r.spec.batch, r.spec.updates, r.result.ok ? 1 : 0, l.step_ms,
                           l.comm_ms, l.samples_per_s, r.efficiency, l.comm_share, l.comm_bytes,
                           OptStateBytes(r, model_numel), r.result.error);
  }
  return out;
}

std::string TrafficCsv(const std::vector<TrafficRow>& rows) {
  std::string out =
      "stage,pattern,ranks,per_rank_batch,comm_dtype,updates,ok,tensors,gradient_bytes,comm_bytes_logged_rank0,"
      "expected_bytes,observed_bytes,observed_minus_expected_pct,observed_packets,expected_busiest_rank_bytes,"
      "observed_run_bytes,iteration_ms,rte_updates_per_epoch,expected_bytes_per_rte_epoch,loss_rel_diff_vs_fp32,error\n";
  for (const auto& r : rows) {
    const double pct = r.expected.per_rank_mean > 0 ? 100 * (r.observed_bytes / r.expected.per_rank_mean - 1) : 0;
    out += absl::StrFormat("%s,%s,%d,%d,%s,%d,%d,%d,%.0f,%d,%.0f,%.0f,%.2f,%.1f,%.0f,%.0f,%.3f,%d,%.0f,%s,\"%s\"\n",
                           r.stage->id, PatternName(r.stage->report.pattern), r.ranks, r.batch, r.comm_dtype, r.updates,
                           r.ok ? 1 : 0, r.tensors, r.gradient_bytes, r.comm_bytes_logged, r.expected.per_rank_mean,
                           r.observed_bytes, pct, r.observed_packets, r.expected.busiest_rank, r.observed_run_bytes,
                           r.step_ms, r.rte_updates_per_epoch,
                           r.expected.per_rank_mean * static_cast<double>(r.rte_updates_per_epoch),
                           r.loss_rel_diff_vs_fp32 < 0 ? "" : absl::StrFormat("%.3g", r.loss_rel_diff_vs_fp32),
                           r.error);
  }
  return out;
}

std::string TensorsCsv(const std::vector<GradientTensor>& tensors) {
  std::string out = "index,name,shape,numel,bytes_fp32,bytes_fp16\n";
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::vector<std::string> dims;
    for (int64_t d : tensors[i].shape) dims.push_back(std::to_string(d));
    out += absl::StrFormat("%d,%s,%s,%d,%d,%d\n", i, tensors[i].name, absl::StrJoin(dims, "x"), tensors[i].numel,
                           4 * tensors[i].numel, 2 * tensors[i].numel);
  }
  return out;
}

// gnuplot: two panels (samples/s and efficiency against ranks, one line per stage and link),
// and expected against observed bytes per rank per update. Returns "" or why not.
std::string Plot(const Config& c, const std::vector<ScalingRow>& scaling, const std::vector<TrafficRow>& traffic) {
  if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return "gnuplot is not installed (tools/setup.sh installs gnuplot-nox): no PNG plots";
  }
  const std::string dir = c.out + "/plots";
  MakeDirs(dir);
  std::vector<std::string> series;  // "stage link" keys in order
  std::map<std::string, std::string> data;
  for (const auto& r : scaling) {
    if (!r.result.ok) continue;
    const std::string key = r.spec.stage->id + " " + r.spec.link;
    if (!data.count(key) && r.spec.ranks > 1 && r.baseline_from_loopback) {
      // A link's series starts at the one-rank loopback run it is measured against.
      for (const auto& base : scaling) {
        if (base.spec.stage == r.spec.stage && base.spec.link == "loopback" && base.spec.ranks == 1 && base.result.ok) {
          data[key] += absl::StrFormat("1 %.3f 1\n", base.result.log.samples_per_s);
        }
      }
    }
    if (std::find(series.begin(), series.end(), key) == series.end()) series.push_back(key);
    data[key] += absl::StrFormat("%d %.3f %.4f\n", r.spec.ranks, r.result.log.samples_per_s,
                                 r.efficiency);
  }
  std::string gp = absl::StrFormat(
      "set terminal pngcairo size 1200,500 font ',10'\nset output '%s/scaling.png'\nset multiplot layout 1,2 "
      "title 'distlm scaling: tiny %s, per-rank batch %d, seq %d (all ranks share this machine)'\n"
      "set xlabel 'ranks'\nset xtics (1,2,4,8)\nset grid\nset key top left\nset ylabel 'samples/s'\n"
      "set yrange [0:*]\n",
      c.out, c.model == "vit" ? "ViT" : "BERT", c.per_rank_batch, c.model == "vit" ? 17 : c.max_seq_length);
  std::vector<std::string> plots;
  for (size_t i = 0; i < series.size(); ++i) {
    const std::string file = absl::StrFormat("%s/scaling_%d.dat", dir, i);
    WriteFileAtomically(file, data[series[i]]);
    plots.push_back(absl::StrFormat("'%s' using 1:2 with linespoints title '%s'", file, series[i]));
  }
  if (plots.empty()) return "no scaling run succeeded: no plots";
  gp += "plot " + absl::StrJoin(plots, ", ") + "\n";
  gp += "set ylabel 'scaling efficiency = throughput_N / (N throughput_1)'\nset key bottom left\n";
  for (auto& p : plots) p = absl::StrReplaceAll(p, {{"using 1:2", "using 1:3"}});
  gp += "plot " + absl::StrJoin(plots, ", ") + "\nunset multiplot\n";

  std::string tdat;
  for (const auto& r : traffic) {
    if (!r.ok) continue;
    tdat += absl::StrFormat("\"%s b%d %s\" %.4f %.4f\n", r.stage->id, r.batch, r.comm_dtype,
                            r.expected.per_rank_mean / 1e6, r.observed_bytes / 1e6);
  }
  if (!tdat.empty()) {
    WriteFileAtomically(dir + "/traffic.dat", tdat);
    gp += absl::StrFormat(
        "reset\nset terminal pngcairo size 1200,500 font ',10'\nset output '%s/traffic.png'\n"
        "set title 'bytes each rank sends per update, %d ranks on loopback: expected payload vs observed (lo)'\n"
        "set style data histogram\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
        "set ylabel 'MB per rank per update'\nset yrange [0:*]\nset xtics rotate by -30\nset grid ytics\n"
        "set key top right\n"
        "plot '%s/traffic.dat' using 2:xtic(1) title 'expected (payload)', '' using 3 title 'observed (lo tx)'\n",
        c.out, c.traffic_ranks, dir);
  }
  WriteFileAtomically(dir + "/plots.gp", gp);
  return train::RunGnuplot(dir + "/plots.gp", dir + "/gnuplot.log");
}

std::string MachineLine() {
  struct utsname u {};
  uname(&u);
  return absl::StrFormat("%u cores (std::thread::hardware_concurrency), Linux %s", std::thread::hardware_concurrency(),
                         u.release);
}

std::string Markdown(const Env& env, const std::vector<ScalingRow>& scaling, const std::vector<TrafficRow>& traffic,
                     const std::vector<GradientTensor>& tensors, const std::string& plot_note,
                     const std::string& command) {
  const Config& c = env.config;
  const int64_t model_numel = TotalNumel(tensors);
  std::string md = "# distlm scaling report\n\n";
  md += absl::StrFormat("Written by `%s` on %s.\n\n", command, MachineLine());
  if (c.model == "vit") {
    md += absl::StrFormat(
        "Every run trains the tiny ViT (32x32 images in 8x8 patches: 17 tokens, hidden 64, 2 layers; %d gradient "
        "tensors, %d parameters = %.3f MB in float32) on a generated CIFAR-10-format set, with the stages' "
        "reference solutions. Each run's folder is under `runs/`.\n\n",
        tensors.size(), TotalNumel(tensors), 4e-6 * TotalNumel(tensors));
  } else {
    md += absl::StrFormat(
        "Every run trains the tiny BERT (hidden 128, 2 layers; %d gradient tensors, %d parameters = %.3f MB in "
        "float32) on the built-in RTE-style sample (repeated), sequence length %d, with the stages' reference "
        "solutions. Each run's folder is under `runs/`.\n\n",
        tensors.size(), TotalNumel(tensors), 4e-6 * TotalNumel(tensors), c.max_seq_length);
  }
  md += absl::StrFormat(
      "**All ranks share this machine's %u cores.** Compute does not scale here as it does on real nodes. Each rank "
      "runs %s; while there are at least as many cores as ranks each rank has a core to itself (as on one node "
      "per rank), beyond that ranks take turns, each step gets slower as N grows, and the scaling efficiency "
      "mostly measures that contention, not the network. Other jobs on the machine add noise of their own "
      "(iteration times of a few updates vary by tens of percent from one report to the next). On a real cluster "
      "(one rank per node) compute stays constant per rank and the efficiency measures communication and "
      "synchronisation alone.\n\n",
      std::thread::hardware_concurrency(),
      c.threads_per_rank > 0 ? absl::StrFormat("%d LibTorch thread(s) (--threads_per_rank)", c.threads_per_rank)
                             : std::string("the stages' default threads (cores / ranks)"));
  md += env.private_netns
            ? "Network: the report ran in its own network namespace, so `lo` carried only these runs' traffic.\n\n"
            : "Network: the machine's shared `lo` (not root, or --private_netns=false): its counters include every "
              "other process's loopback traffic, so observed bytes are an upper bound.\n\n";
  if (!env.links_note.empty()) md += env.links_note + "\n\n";

  md += "## Scaling\n\n";
  md += absl::StrFormat(
      "Weak scaling: %d examples per rank per update, so the global batch is %d x N. Iteration time is the mean "
      "over updates 2..%d (update 1 pays one-time costs); samples/s = global batch / iteration time; scaling "
      "efficiency = samples/s at N / (N x samples/s at 1 rank) of the same stage; communication share = the time "
      "the update was blocked communicating (`comm_time_ms`: the whole gradient synchronisation in tasks 2a/2b, "
      "only the wait after backward in task 3, whose all-reduces overlap backward) / iteration time.\n\n",
      c.per_rank_batch, c.per_rank_batch, c.updates);
  md += "| stage | link | ranks | iteration ms | samples/s | efficiency | comm share | AdamW state per rank (MB) |\n";
  md += "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& r : scaling) {
    if (!r.result.ok) {
      md += absl::StrFormat("| %s | %s | %d | failed: %s | | | | |\n", r.spec.stage->id, r.spec.link, r.spec.ranks,
                            r.result.error);
      continue;
    }
    const LogSummary& l = r.result.log;
    md += absl::StrFormat("| %s | %s | %d | %.1f | %.1f | %.2f%s | %.0f %% | %s |\n", r.spec.stage->id,
                          r.spec.link, r.spec.ranks, l.step_ms, l.samples_per_s, r.efficiency,
                          r.baseline_from_loopback ? "*" : "", 100 * l.comm_share, Mb(OptStateBytes(r, model_numel)));
  }
  md += "\n`*`: against the 1-rank loopback run (one rank sends nothing, so its link does not matter).\n\n";

  md += "## Traffic per update\n\n";
  md += absl::StrFormat(
      "%d ranks on loopback. Per rank and update: *expected* is the payload the synchronisation must send "
      "(traffic.h: ring all_reduce 2(N-1)/N x S on every rank; gather + scatter (N-1) x S on rank 0 and S on the "
      "others, the same total; task 5 on Gloo, all_reduce + slice + all-gather, 3(N-1)/N x S, where a native "
      "reduce-scatter would send all_reduce's 2(N-1)/N x S); *observed* is `lo`'s transmitted bytes, from a run of %d updates minus a run of "
      "%d, divided by %d updates and %d ranks (so start-up, the rendezvous, task 3's initial broadcast and the "
      "model save cancel out). S = gradient bytes in the communication dtype. `comm_bytes` is what rank 0 handed "
      "the collectives (its log's `comm_bytes`: S for all_reduce; S + N x S for task 2a's rank 0, its gather "
      "input and the scatter's N pieces).\n\n",
      c.traffic_ranks, 2 * c.traffic_updates, c.traffic_updates, c.traffic_updates, c.traffic_ranks);
  md += "| stage | batch/rank | dtype | S (MB) | comm_bytes rank 0 (MB) | expected (MB) | observed (MB) | "
        "difference | packets | busiest rank expected (MB) | per RTE epoch expected (MB) |\n";
  md += "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& r : traffic) {
    if (!r.ok) {
      md += absl::StrFormat("| %s | %d | %s | failed: %s | | | | | | | |\n", r.stage->id, r.batch, r.comm_dtype,
                            r.error);
      continue;
    }
    md += absl::StrFormat("| %s | %d | %s | %s | %s | %s | %s | %+.1f %% | %.0f | %s | %s |\n", r.stage->id,
                          r.batch, r.comm_dtype, Mb(r.gradient_bytes), Mb(static_cast<double>(r.comm_bytes_logged)),
                          Mb(r.expected.per_rank_mean), Mb(r.observed_bytes),
                          100 * (r.observed_bytes / r.expected.per_rank_mean - 1), r.observed_packets,
                          Mb(r.expected.busiest_rank),
                          Mb(r.expected.per_rank_mean * static_cast<double>(r.rte_updates_per_epoch)));
  }
  for (const auto& r : traffic) {
    if (r.loss_rel_diff_vs_fp32 < 0) continue;
    md += absl::StrFormat("\n%s with `--comm_dtype=%s`: over its %d updates the loss differs from fp32's by at most "
                          "%.2g relative (same data and seed; %s rounds each value by at most 2^-%d).\n",
                          r.stage->id, r.comm_dtype, static_cast<int>(r.losses.size()), r.loss_rel_diff_vs_fp32,
                          r.comm_dtype == "bf16" ? "bfloat16" : "float16", r.comm_dtype == "bf16" ? 8 : 11);
  }
  md += absl::StrFormat(
      "\nPer RTE epoch: GLUE RTE's %d training pairs at that batch and %d ranks (DistributedSampler: "
      "ceil(2490/N) per rank, the last batch partial) = updates per epoch x expected bytes per update.\n\n",
      kRteTrainExamples, c.traffic_ranks);
  md += "How to read it:\n\n"
        "- **Batch size does not change the traffic**: every update sends one gradient per parameter, whatever the "
        "batch; only the time between updates changes. Rows of one stage differ by noise only.\n"
        "- **fp16 halves it** (`--comm_dtype=fp16`: gradients cast to float16 for the all-reduce and back, as "
        "PyTorch DDP's fp16_compress_hook does). Its effect on the loss over 5 updates on 2 ranks is below 2e-7 "
        "relative (`//task4_bench:comm_dtype_test`); float16 rounds each element by at most 2^-11.\n"
        "- **observed > expected** because of what the formulas leave out: TCP/IP headers (about 52-66 bytes per "
        "packet: 20 IP + 32 TCP with timestamps + 14 of the loopback's Ethernet header; `packets` is per rank per "
        "update, and loopback's 64 KiB MTU makes packets large, so this is well under 1 %), TCP's acknowledgements "
        "(packets without payload), Gloo's own control messages and the per-update loss all-reduce of one double, "
        "and the store's heartbeat (a few hundred bytes per rank per second, so it grows with iteration time). "
        "A difference of more than a few percent points at a collective the formula does not model.\n"
        "- **gather + scatter vs ring**: per rank on average they send the same bytes, but rank 0 of task 2a sends "
        "(N-1) x S and receives as much: its link is the bottleneck (the `busiest rank` column), while the ring "
        "spreads 2(N-1)/N x S over every link.\n\n";

  md += "## Plots\n\n";
  md += plot_note.empty() ? absl::StrFormat("- `%s/scaling.png`: samples/s and efficiency against ranks\n- "
                                            "`%s/traffic.png`: expected vs observed bytes per rank per update\n\n",
                                            c.out, c.out)
                          : "- " + plot_note + "\n\n";

  md += "## The same on a real cluster\n\n"
        "One rank per node; on node R (R = 0 .. N-1), with rank 0's address as master:\n\n"
        "```sh\n"
        "bazel run //task2b:reference -- --master_ip=10.10.1.1 --master_port=6585 --world_size=4 --local_rank=R \\\n"
        "    --per_gpu_train_batch_size=16 --max_steps=40 --do_eval=false --output_dir=$HOME/distlm_runs/task2b_n4\n"
        "```\n\n"
        "(the same for `//task2a:reference`, `//task3:reference` and `//task5:reference`; add `--comm_dtype=fp16` for compressed "
        "gradients; `--world_size=1`, 2, 4 for the scaling points). Rank 0's `train_log.jsonl` has `step_time_ms`, "
        "`samples_per_s`, `comm_time_ms` and `comm_bytes` per update: the same figures as above. For observed "
        "bytes read the experiment interface's counters (`/sys/class/net/IFACE/statistics/tx_bytes`) before and "
        "after a run, on rank 0's node and on another: there each node's counter is that rank's own traffic.\n";
  return md;
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
      "bridge, each node's link shaped with tc tbf to R in both directions. No delay is added (the cluster tool's "
      "--delay needs netem, which this course's VM kernel lacks), so the links have a rate but loopback-like "
      "latency.";
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
  env.data_dir = MakeDataDir(c);
  env.launch = FindRunfile("tools/launch");
  env.cluster = FindRunfile("task4_bench/cluster/emulated_cluster");
  bool wants_links = false;
  for (const auto& l : c.links) wants_links = wants_links || l != "loopback";
  env.links_possible = wants_links && CanEmulateLinks(&env.links_note);
  if (!wants_links) env.links_note = "Emulated links: none requested (--links).";
  std::printf("report: writing %s%s\nreport: %s\n", c.out.c_str(),
              env.private_netns ? " (in a private network namespace)" : "", env.links_note.c_str());

  // The gradients every update communicates: from the tiny model the stages build.
  std::vector<GradientTensor> tensors;
  if (c.model == "vit") {
    vit::ViTConfig config = vit::TinyViTConfig();  // the stages' default ViT, 10 classes
    vit::ViTForImageClassification model(config);
    tensors = GradientTensors(*model);
  } else {
    // The stages' default model: TinyBertConfig over the built-in vocabulary.
    const std::string vocab = ReadFile(FindRunfile("common/testdata/vocab.txt"));
    int64_t lines = std::count(vocab.begin(), vocab.end(), '\n');
    tensors = GradientTensors(bert::TinyBertConfig(lines));
  }
  WriteFileAtomically(c.out + "/tensors.csv", TensorsCsv(tensors));

  std::vector<TrafficRow> traffic;
  for (const StageSpec* stage : c.stages) {
    for (int b : c.traffic_batches) traffic.push_back(MeasureTraffic(env, stage, b, "fp32", TotalNumel(tensors)));
  }
  const int middle_batch = c.traffic_batches[c.traffic_batches.size() / 2];
  for (const std::string& dtype : c.traffic_comm_dtypes) {
    if (dtype == "fp32") continue;
    for (const StageSpec* stage : c.stages) {
      if (stage->takes_comm_dtype) traffic.push_back(MeasureTraffic(env, stage, middle_batch, dtype, TotalNumel(tensors)));
    }
  }
  CompareLosses(traffic);
  WriteFileAtomically(c.out + "/traffic.csv", TrafficCsv(traffic));

  std::vector<ScalingRow> scaling = RunScaling(env);
  WriteFileAtomically(c.out + "/scaling.csv", ScalingCsv(scaling, TotalNumel(tensors)));

  const std::string plot_note = Plot(c, scaling, traffic);
  if (!plot_note.empty()) std::printf("report: %s\n", plot_note.c_str());
  WriteFileAtomically(c.out + "/report.md", Markdown(env, scaling, traffic, tensors, plot_note, command));
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
