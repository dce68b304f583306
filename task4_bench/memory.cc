// What each stage holds per rank, measured, against ZeRO's formulas.
//
//   bazel run //task4_bench:memory -- --out=DIR [--model=bert_base,vit_b16] [--ranks=1,2,4]
//
// Trains each stage's reference solution (part 1 on one process, the distributed stages on
// every --ranks) for --updates updates of the model (the report's: random weights are enough,
// what is measured is where the bytes are), and reads rank 0's last log line: the bytes of
// parameters, gradients and AdamW state the rank holds, counted from the tensors' storages
// (held_*), and the most bytes the process held in host tensors during the update
// (mem_peak_bytes, the counting allocator: common/runtime/memory_meter.h). Against, in bytes
// per parameter for float32 AdamW (ZeRO's table; part 5's handout):
//   part 1, tasks 2a, 2b, 3   16       parameters 4, gradients 4, moments 8
//   task 5 (ZeRO-2)           4 + 12/N gradients and moments sharded
//   task 6 (ZeRO-3)           16/N     everything sharded; plus the units whole while they run
// Where the measured total differs from the formula by more than 5 %, the table says which part
// differs and where the bytes are. Writes DIR/memory.csv, DIR/memory.md and DIR/memory.png.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/runtime/runfiles.h"
#include "common/stages/stages.h"
#include "common/train/plots.h"
#include "task4_bench/report_runs.h"

ABSL_FLAG(std::string, out, "", "folder to write the table to (created; relative to the folder you ran from)");
ABSL_FLAG(std::string, model, "bert_base,vit_b16", "models, comma-separated (the report's: bert, vit, bert_mid, bert_base, vit_b16, vit_b32)");
ABSL_FLAG(std::string, ranks, "1,2,4", "world sizes of the distributed stages (part 1 runs on one process)");
ABSL_FLAG(std::string, stages, "part1,task2b,task3,task5,task6", "stages, comma-separated");
ABSL_FLAG(int, updates, 2, "updates per run (the last one's line is read)");
ABSL_FLAG(int, per_rank_batch, 2, "examples per rank and update");
ABSL_FLAG(int, max_seq_length, 128, "sequence length (BERT)");
ABSL_FLAG(double, run_timeout_s, 900, "a run still going after this long is stopped and reported as failed");

namespace distlm::task4_bench {
namespace {

// Bytes per parameter ZeRO's table gives each part of the model state at world size n.
struct Formula {
  double params = 4, grads = 4, opt = 8;
  double total() const { return params + grads + opt; }
};

Formula FormulaFor(const StageSpec& st, int n) {
  switch (st.report.pattern) {
    case SyncPattern::kAllreduceAllGather: return {4, 4.0 / n, 8.0 / n};          // task 5: ZeRO-2
    case SyncPattern::kAllreduceTwoAllGathers: return {4.0 / n, 4.0 / n, 8.0 / n};  // task 6: ZeRO-3
    default: return {};
  }
}

struct Row {
  std::string model, stage;
  int ranks = 1;
  SyncPattern pattern = SyncPattern::kNone;
  int64_t params = 0;  // parameters of the model
  bool ok = false;
  std::string error;
  int64_t held_params = 0, held_grads = 0, held_opt = 0, peak = 0, full_peak = -1;
  Formula formula;
  double measured() const { return static_cast<double>(held_params + held_grads + held_opt); }
  double off() const { return measured() / (formula.total() * params) - 1; }
};

int64_t Field(const nlohmann::json& line, const char* key) {
  if (!line.contains(key) || !line[key].is_number_integer()) {
    throw UserError("the log line has no integer " + std::string(key));
  }
  return line[key].get<int64_t>();
}

Row Measure(const Env& env, const ReportModel& model, const StageSpec& st, int ranks) {
  Row r{model.name, st.id, ranks, st.report.pattern};
  for (const auto& t : model.tensors) r.params += t.numel;
  r.formula = FormulaFor(st, ranks);
  RunSpec spec;
  spec.model = &model;
  spec.stage = &st;
  spec.ranks = ranks;
  spec.batch = env.config.per_rank_batch;
  spec.updates = env.config.updates;
  RunResult res = Train(env, spec);
  if (!res.ok) {
    r.error = res.error;
    return r;
  }
  try {
    std::vector<std::string> lines = absl::StrSplit(ReadFile(res.dir + "/train_log.jsonl"), '\n', absl::SkipEmpty());
    const nlohmann::json last = nlohmann::json::parse(lines.back());
    r.held_params = Field(last, "held_param_bytes");
    r.held_grads = Field(last, "held_grad_bytes");
    r.held_opt = Field(last, "held_opt_bytes");
    r.peak = Field(last, "mem_peak_bytes");
    if (last.contains("full_bytes_peak")) r.full_peak = Field(last, "full_bytes_peak");
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = res.dir + "/train_log.jsonl: " + e.what();
  }
  return r;
}

std::string Mb(double bytes) { return absl::StrFormat("%.1f", bytes / 1e6); }

// Which parts of the model state differ from the formula by more than 5 % of its total, and
// where the bytes are for the ones this project knows.
std::string WhereTheBytesAre(const Row& r) {
  if (std::abs(r.off()) <= 0.05) return "";
  const double p = static_cast<double>(r.params), total = r.formula.total();
  std::vector<std::string> parts;
  auto part = [&](const char* what, double got, double want, const std::string& why) {
    if (std::abs(got / p - want) <= 0.05 * total) return;
    parts.push_back(absl::StrFormat("%s %.2f B/param, not %.2f%s", what, got / p, want, why.empty() ? "" : ": " + why));
  };
  const bool zero2 = r.pattern == SyncPattern::kAllreduceAllGather;
  part("gradients", r.held_grads, r.formula.grads,
       zero2 ? "backward writes the whole gradient into a flat buffer held beside the shard (ZeRO-2's saving needs "
               "each bucket reduced and freed during backward, which task 5 does not do)"
             : "");
  part("parameters", r.held_params, r.formula.params, "");
  part("AdamW state", r.held_opt, r.formula.opt, "");
  return absl::StrJoin(parts, "; ");
}

std::string Csv(const std::vector<Row>& rows) {
  std::string s = "model,stage,ranks,params,held_param_bytes,held_grad_bytes,held_opt_bytes,measured_bytes_per_param,"
                  "formula_bytes_per_param,off,mem_peak_bytes,full_bytes_peak,error\n";
  for (const Row& r : rows) {
    s += absl::StrFormat("%s,%s,%d,%d,%d,%d,%d,%.4f,%.4f,%.4f,%d,%d,\"%s\"\n", r.model, r.stage, r.ranks, r.params,
                         r.held_params, r.held_grads, r.held_opt, r.ok ? r.measured() / r.params : 0.0,
                         r.formula.total(), r.ok ? r.off() : 0.0, r.peak, r.full_peak, r.error);
  }
  return s;
}

std::string Markdown(const std::vector<Row>& rows, const std::string& command) {
  std::string md = "# Memory per rank: measured against ZeRO's formulas\n\n`" + command + "`\n\n";
  md += "Rank 0's last update. Held: the bytes of the tensors' storages (each counted once) of parameters, "
        "gradients and AdamW's moments; formula: ZeRO's bytes per parameter for float32 AdamW (16; task 5, "
        "ZeRO-2, 4 + 12/N; task 6, ZeRO-3, 16/N). Peak: the most bytes of host tensors the process held during "
        "the update (the counting allocator), so peak - held is activations, temporaries and, for task 6, the "
        "units held whole while they run (full buffers). MB = 10^6 bytes.\n\n";
  md += "| model | stage | N | held MB (params + grads + AdamW) | B/param | formula | off | peak MB | peak - held MB "
        "| where the bytes are (off > 5 %) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const Row& r : rows) {
    if (!r.ok) {
      md += absl::StrFormat("| %s | %s | %d | failed: %s | | | | | | |\n", r.model, r.stage, r.ranks, r.error);
      continue;
    }
    std::string where = WhereTheBytesAre(r);
    if (r.full_peak >= 0) {
      where += std::string(where.empty() ? "" : "; ") + "full buffers at most " + Mb(r.full_peak) + " MB";
    }
    md += absl::StrFormat("| %s | %s | %d | %s (%s + %s + %s) | %.2f | %.2f | %+.1f %% | %s | %s | %s |\n", r.model,
                          r.stage, r.ranks, Mb(r.measured()), Mb(r.held_params), Mb(r.held_grads), Mb(r.held_opt),
                          r.measured() / r.params, r.formula.total(), 100 * r.off(), Mb(r.peak),
                          Mb(r.peak - r.measured()), where);
  }
  return md;
}

// Held and formula bytes per parameter for each model's stages and world sizes.
std::string Plot(const std::string& out, const std::vector<Row>& rows) {
  std::string data;
  for (const Row& r : rows) {
    if (!r.ok) continue;
    data += absl::StrFormat("\"%s %s N=%d\" %.4f %.4f\n", r.model, r.stage, r.ranks, r.measured() / r.params,
                            r.formula.total());
  }
  WriteFileAtomically(out + "/memory.dat", data);
  const std::string script = absl::StrFormat(
      "set terminal pngcairo size %d,%d\nset output '%s/memory.png'\nset style data histograms\n"
      "set style histogram clustered\nset style fill solid 0.8\nset ylabel 'bytes per parameter per rank'\n"
      "set xtics rotate by -60 font ',8'\nset title 'Model state per rank: measured against ZeRO formula'\n"
      "plot '%s/memory.dat' using 2:xtic(1) title 'measured', '' using 3 title 'formula'\n",
      train::kPlotWidth * 2, train::kPlotHeight, out, out);
  WriteFileAtomically(out + "/memory.gp", script);
  return train::RunGnuplot(out + "/memory.gp", out + "/gnuplot.log");
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage("distlm memory table: bazel run //task4_bench:memory -- --out=DIR");
  auto rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) throw UserError("unexpected argument '" + std::string(rest[1]) + "' (flags are --name=value)");
  Env env;
  Config& c = env.config;
  c.out = absl::GetFlag(FLAGS_out);
  if (c.out.empty()) throw UserError("--out is required: the folder to write the table to");
  if (c.out[0] != '/') c.out = UserWorkingDirectory() + "/" + c.out;
  c.ranks = ParseInts("ranks", absl::GetFlag(FLAGS_ranks), 1, 64);
  c.updates = absl::GetFlag(FLAGS_updates);
  c.per_rank_batch = absl::GetFlag(FLAGS_per_rank_batch);
  c.max_seq_length = absl::GetFlag(FLAGS_max_seq_length);
  c.run_timeout_s = absl::GetFlag(FLAGS_run_timeout_s);
  c.traffic_batches = {c.per_rank_batch};  // the data set is sized for the runs here only
  c.traffic_updates = 1;
  if (c.updates < 1 || c.per_rank_batch < 1) throw UserError("--updates and --per_rank_batch must be at least 1");
  if (c.max_seq_length < 8 || c.max_seq_length > 512) throw UserError("--max_seq_length must be in 8..512");
  for (const auto& name : std::vector<std::string>(absl::StrSplit(absl::GetFlag(FLAGS_stages), ',', absl::SkipEmpty()))) {
    const StageSpec* st = stages::Find(name);
    if (st == nullptr) throw UserError("--stages: unknown stage '" + name + "'");
    c.stages.push_back(st);
  }
  c.models = absl::StrSplit(absl::GetFlag(FLAGS_model), ',', absl::SkipEmpty());
  for (const auto& m : c.models) {
    if (!IsReportModel(m)) throw UserError("--model: '" + m + "' is not one of " + ReportModelNames());
  }
  std::string command = "bazel run //task4_bench:memory --";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  MakeDirs(c.out);
  for (const std::string& name : c.models) {
    env.models.push_back(MakeReportModel(c, name));
    env.models.back().data_dir = MakeDataDir(c, env.models.back());
  }
  env.launch = FindRunfile("tools/launch");
  std::vector<Row> rows;
  for (const ReportModel& model : env.models) {
    for (const StageSpec* st : c.stages) {
      for (int n : c.ranks) {
        if (st->grading.ranks == 1 && n != 1) continue;  // part 1: one process
        rows.push_back(Measure(env, model, *st, n));
        WriteFileAtomically(c.out + "/memory.csv", Csv(rows));  // a run cut short keeps what it measured
      }
    }
  }
  WriteFileAtomically(c.out + "/memory.md", Markdown(rows, command));
  const std::string plot = Plot(c.out, rows);
  if (!plot.empty()) std::printf("memory: %s\n", plot.c_str());
  int failed = 0;
  for (const Row& r : rows) failed += r.ok ? 0 : 1;
  std::printf("memory: %s/memory.md written (%d run(s) failed)\n", c.out.c_str(), failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace distlm::task4_bench

int main(int argc, char** argv) {
  return distlm::RunMain([&] { return distlm::task4_bench::Main(argc, argv); });
}
