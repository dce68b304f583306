// The runs of the scaling report (report.cc): what they train, how one run is launched and
// read back, and the two experiments built from runs (scaling; traffic per update).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "task4_bench/accounting.h"
#include "task4_bench/traffic.h"

namespace distlm::task4_bench {

using StageSpec = stages::Row;

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
  std::vector<std::string> models = {"bert"};  // names ReportModelNames() lists
  int threads_per_rank = 1;
  double run_timeout_s = 600;
};

// What every run trains. The tiny models are the stages' built-in defaults; the base sizes are
// drawn at random (seed 42) into <out>/model once and loaded by every rank with
// --model_name_or_path, so their step times and bytes are those of the real architectures
// (what they learn does not matter for a timing).
struct ReportModel {
  std::string name;         // bert, vit, bert_mid, bert_base, vit_b16, vit_b32
  bool vit = false;
  std::string label;        // "tiny BERT", "ViT-B/16", ...: the plots' titles
  std::string description;  // what report.md says the runs train
  int64_t tokens_per_example = 0;
  std::string dataset;      // the real data set its task trains on: "RTE" or "CIFAR-10"
  int64_t dataset_examples = 0;  // its training examples, for the bytes of one real epoch
  std::string dir;          // the generated checkpoint; "" for the tiny built-in models
  std::vector<GradientTensor> tensors;  // every gradient an update communicates
  std::string data_dir;     // what it trains on (MakeDataDir)
};

// A comma-separated flag of whole numbers, each in lo..hi (report.cc's and memory.cc's
// --ranks, ...); UserError naming --flag and the part that is not.
std::vector<int> ParseInts(const std::string& flag, const std::string& value, int lo, int hi);

// The names --model accepts, for its help and its error.
std::string ReportModelNames();
bool IsReportModel(const std::string& name);
// Builds the model's description (and, for a base size, its checkpoint in <out>/model_<name>).
ReportModel MakeReportModel(const Config& c, const std::string& name);

struct Env {
  Config config;
  std::vector<ReportModel> models;  // one per --model name, in order
  std::string launch;
  std::string cluster;
  bool private_netns = false;
  bool links_possible = false;
  std::string links_note;  // why rates are skipped, if they are
};

// Runs argv with its stdout and stderr in log_path, in its own process group; past the
// deadline the group gets SIGTERM (the emulated cluster then tears down), then SIGKILL.
// Returns the exit status (128 + signal when killed), or -1 on timeout.
int RunLogged(const std::vector<std::string>& argv, const std::string& log_path, double timeout_s);

// The training data of the model's runs, written under c.out: the built-in RTE-style sample
// repeated, or a generated CIFAR-10-format set, large enough that every run stays inside its
// first epoch.
std::string MakeDataDir(const Config& c, const ReportModel& model);

struct RunSpec {
  const ReportModel* model = nullptr;
  const StageSpec* stage = nullptr;
  int ranks = 1;
  std::string link = "loopback";
  int batch = 16;
  int updates = 5;
  std::string comm_dtype = "fp32";
  std::string Id() const;  // the run's folder name (the model's first, unless it is the tiny BERT)
};

struct RunResult {
  bool ok = false;
  std::string error;
  LogSummary log;
  InterfaceCounters lo_before, lo_after;
  double wall_s = 0;
  std::string dir;
};

// One training run of a stage's reference solution (its folder: <out>/runs/<spec.Id()>).
RunResult Train(const Env& env, const RunSpec& spec);

// ------------------------------------------------------------------------------------------
// Scaling: each model, stage and link at every world size, per-rank batch fixed (weak scaling).

struct ScalingRow {
  RunSpec spec;
  RunResult result;
  double efficiency = 0;
  bool baseline_from_loopback = false;
};

std::vector<ScalingRow> RunScaling(const Env& env);

// ------------------------------------------------------------------------------------------
// Traffic: bytes per rank per update, from a run of U updates and one of 2U.

struct TrafficRow {
  const ReportModel* model = nullptr;
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
  int64_t updates_per_epoch = 0;  // of the model's real data set at this batch and world size
  std::vector<double> losses;       // of the 2U run
  double loss_rel_diff_vs_fp32 = -1;  // largest, over the 2U updates; -1: not compared
};

TrafficRow MeasureTraffic(const Env& env, const ReportModel& model, const StageSpec* stage, int batch,
                          const std::string& comm_dtype);

// For each narrow-dtype row, the largest relative loss difference from the fp32 row of the same
// model, stage and batch (the same data and seed, so only the rounding differs).
void CompareLosses(std::vector<TrafficRow>& rows);

}  // namespace distlm::task4_bench
