// The scaling report's output: see report_output.h.
#include "task4_bench/report_output.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/runtime/atomic_file.h"
#include "common/train/plots.h"

namespace distlm::task4_bench {
namespace {

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
    case SyncPattern::kAllreduceTwoAllGathers:
      return "per unit: all_reduce + slice + 2 all-gathers";
  }
  return "?";
}

std::string Mb(double bytes) { return absl::StrFormat("%.3f", bytes / 1e6); }

// AdamW's two float32 moments on rank 0: what task 5's log says, else the whole model's (8 x P).
int64_t OptStateBytes(const ScalingRow& r) {
  return r.result.log.opt_state_bytes >= 0 ? r.result.log.opt_state_bytes : 8 * TotalNumel(r.spec.model->tensors);
}

std::string MachineLine() {
  struct utsname u {};
  uname(&u);
  return absl::StrFormat("%u cores (std::thread::hardware_concurrency), Linux %s", std::thread::hardware_concurrency(),
                         u.release);
}

}  // namespace

std::string ScalingCsv(const std::vector<ScalingRow>& rows) {
  std::string out =
      "model,stage,link,ranks,per_rank_batch,updates,ok,iteration_ms,comm_ms,samples_per_s,scaling_efficiency,comm_share,"
      "comm_bytes_per_update,opt_state_bytes_per_rank,error\n";
  for (const auto& r : rows) {
    const LogSummary& l = r.result.log;
    out += absl::StrFormat("%s,%s,%s,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.4f,%.4f,%d,%d,\"%s\"\n", r.spec.model->name,
                           r.spec.stage->id,
                           r.spec.link, r.spec.ranks, r.spec.batch, r.spec.updates, r.result.ok ? 1 : 0, l.step_ms,
                           l.comm_ms, l.samples_per_s, r.efficiency, l.comm_share, l.comm_bytes,
                           OptStateBytes(r), r.result.error);
  }
  return out;
}

std::string TrafficCsv(const std::vector<TrafficRow>& rows) {
  std::string out =
      "model,stage,pattern,ranks,per_rank_batch,comm_dtype,updates,ok,tensors,gradient_bytes,comm_bytes_logged_rank0,"
      "expected_bytes,observed_bytes,observed_minus_expected_pct,observed_packets,expected_busiest_rank_bytes,"
      "observed_run_bytes,iteration_ms,updates_per_epoch,expected_bytes_per_epoch,loss_rel_diff_vs_fp32,error\n";
  for (const auto& r : rows) {
    const double pct = r.expected.per_rank_mean > 0 ? 100 * (r.observed_bytes / r.expected.per_rank_mean - 1) : 0;
    out += absl::StrFormat("%s,%s,%s,%d,%d,%s,%d,%d,%d,%.0f,%d,%.0f,%.0f,%.2f,%.1f,%.0f,%.0f,%.3f,%d,%.0f,%s,\"%s\"\n",
                           r.model->name, r.stage->id, PatternName(r.stage->report.pattern), r.ranks, r.batch, r.comm_dtype, r.updates,
                           r.ok ? 1 : 0, r.tensors, r.gradient_bytes, r.comm_bytes_logged, r.expected.per_rank_mean,
                           r.observed_bytes, pct, r.observed_packets, r.expected.busiest_rank, r.observed_run_bytes,
                           r.step_ms, r.updates_per_epoch,
                           r.expected.per_rank_mean * static_cast<double>(r.updates_per_epoch),
                           r.loss_rel_diff_vs_fp32 < 0 ? "" : absl::StrFormat("%.3g", r.loss_rel_diff_vs_fp32),
                           r.error);
  }
  return out;
}

std::string TensorsCsv(const std::vector<ReportModel>& models) {
  std::string out = "model,index,name,shape,numel,bytes_fp32,bytes_fp16\n";
  for (const ReportModel& m : models) {
    const std::vector<GradientTensor>& tensors = m.tensors;
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::vector<std::string> dims;
      for (int64_t d : tensors[i].shape) dims.push_back(std::to_string(d));
      out += absl::StrFormat("%s,%d,%s,%s,%d,%d,%d\n", m.name, i, tensors[i].name, absl::StrJoin(dims, "x"),
                             tensors[i].numel, 4 * tensors[i].numel, 2 * tensors[i].numel);
    }
  }
  return out;
}

std::string Plot(const Env& env, const std::vector<ScalingRow>& scaling, const std::vector<TrafficRow>& traffic) {
  const Config& c = env.config;
  if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return "gnuplot is not installed (tools/setup.sh installs gnuplot-nox): no PNG plots";
  }
  const std::string dir = c.out + "/plots";
  MakeDirs(dir);
  // One series per model (named when there are several), stage and link, in the order run.
  const bool several = env.models.size() > 1;
  auto model_prefix = [&](const ReportModel* m) { return several ? m->label + " " : std::string(); };
  std::vector<std::string> series;
  std::map<std::string, std::string> data;
  for (const auto& r : scaling) {
    if (!r.result.ok) continue;
    const std::string key = model_prefix(r.spec.model) + r.spec.stage->id + " " + r.spec.link;
    if (!data.count(key) && r.spec.ranks > 1 && r.baseline_from_loopback) {
      // A link's series starts at the one-rank loopback run it is measured against.
      for (const auto& base : scaling) {
        if (base.spec.model == r.spec.model && base.spec.stage == r.spec.stage && base.spec.link == "loopback" &&
            base.spec.ranks == 1 && base.result.ok) {
          data[key] += absl::StrFormat("1 %.3f 1\n", base.result.log.samples_per_s);
        }
      }
    }
    if (std::find(series.begin(), series.end(), key) == series.end()) series.push_back(key);
    data[key] += absl::StrFormat("%d %.3f %.4f\n", r.spec.ranks, r.result.log.samples_per_s,
                                 r.efficiency);
  }
  std::vector<std::string> labels;
  for (const ReportModel& m : env.models) labels.push_back(absl::StrFormat("%s (%d tokens)", m.label, m.tokens_per_example));
  std::string gp = absl::StrFormat(
      "set terminal pngcairo size 1200,500 font ',10'\nset output '%s/scaling.png'\nset multiplot layout 1,2 "
      "title 'distlm scaling: %s, per-rank batch %d (all ranks share this machine)'\n"
      "set xlabel 'ranks'\nset xtics (1,2,4,8)\nset grid\nset key top left\nset ylabel 'samples/s'\n"
      "set yrange [0:*]\n",
      c.out, absl::StrJoin(labels, ", "), c.per_rank_batch);
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
    tdat += absl::StrFormat("\"%s%s b%d %s\" %.4f %.4f\n", model_prefix(r.model), r.stage->id, r.batch, r.comm_dtype,
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

std::string Markdown(const Env& env, const std::vector<ScalingRow>& scaling, const std::vector<TrafficRow>& traffic,
                     const std::string& plot_note, const std::string& command) {
  const Config& c = env.config;
  std::string md = "# distlm scaling report\n\n";
  md += absl::StrFormat("Written by `%s` on %s.\n\n", command, MachineLine());
  md += env.models.size() == 1 ? "The model every run trains:\n\n" : "The models, each run training one of them:\n\n";
  for (const ReportModel& m : env.models) md += "- **" + m.label + "**: " + m.description + "\n";
  md += "\nEach run's folder is under `runs/`.\n\n";
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
  md += "| model | stage | link | ranks | iteration ms | samples/s | efficiency | comm share | AdamW state per rank "
        "(MB) |\n";
  md += "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& r : scaling) {
    if (!r.result.ok) {
      md += absl::StrFormat("| %s | %s | %s | %d | failed: %s | | | | |\n", r.spec.model->label, r.spec.stage->id,
                            r.spec.link, r.spec.ranks, r.result.error);
      continue;
    }
    const LogSummary& l = r.result.log;
    md += absl::StrFormat("| %s | %s | %s | %d | %.1f | %.1f | %.2f%s | %.0f %% | %s |\n", r.spec.model->label,
                          r.spec.stage->id, r.spec.link, r.spec.ranks, l.step_ms, l.samples_per_s, r.efficiency,
                          r.baseline_from_loopback ? "*" : "", 100 * l.comm_share, Mb(OptStateBytes(r)));
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
  md += "| model | stage | batch/rank | dtype | iteration ms | S (MB) | comm_bytes rank 0 (MB) | expected (MB) | "
        "observed (MB) | difference | packets | busiest rank expected (MB) | per real epoch expected (MB) |\n";
  md += "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& r : traffic) {
    if (!r.ok) {
      md += absl::StrFormat("| %s | %s | %d | %s | failed: %s | | | | | | | | |\n", r.model->label, r.stage->id,
                            r.batch, r.comm_dtype, r.error);
      continue;
    }
    md += absl::StrFormat("| %s | %s | %d | %s | %.1f | %s | %s | %s | %s | %+.1f %% | %.0f | %s | %s |\n",
                          r.model->label, r.stage->id, r.batch, r.comm_dtype, r.step_ms, Mb(r.gradient_bytes),
                          Mb(static_cast<double>(r.comm_bytes_logged)), Mb(r.expected.per_rank_mean),
                          Mb(r.observed_bytes), 100 * (r.observed_bytes / r.expected.per_rank_mean - 1),
                          r.observed_packets, Mb(r.expected.busiest_rank),
                          Mb(r.expected.per_rank_mean * static_cast<double>(r.updates_per_epoch)));
  }
  for (const auto& r : traffic) {
    if (r.loss_rel_diff_vs_fp32 < 0) continue;
    md += absl::StrFormat("\n%s, %s with `--comm_dtype=%s`: over its %d updates the loss differs from fp32's by at "
                          "most %.2g relative (same data and seed; %s rounds each value by at most 2^-%d).\n",
                          r.model->label, r.stage->id, r.comm_dtype, static_cast<int>(r.losses.size()), r.loss_rel_diff_vs_fp32,
                          r.comm_dtype == "bf16" ? "bfloat16" : "float16", r.comm_dtype == "bf16" ? 8 : 11);
  }
  std::vector<std::string> epochs;
  for (const ReportModel& m : env.models) {
    epochs.push_back(absl::StrFormat("%s's %d for the %s", m.dataset, m.dataset_examples, m.label));
  }
  md += absl::StrFormat(
      "\nPer real epoch: the training examples of the real data set (%s) at that batch and %d ranks "
      "(DistributedSampler: ceil(examples/N) per rank, the last batch partial) = updates per epoch x expected bytes "
      "per update.\n\n",
      absl::StrJoin(epochs, ", "), c.traffic_ranks);
  md += "How to read it:\n\n"
        "- **Batch size does not change the traffic**: every update sends one gradient per parameter, whatever the "
        "batch; only the time between updates changes. Rows of one stage differ by noise only.\n"
        "- **Nor does the input**: a model's bytes per update follow its parameter count alone (`tensors.csv`), "
        "not its tokens per example; the compute per update follows the tokens. Two models of one parameter "
        "count but more tokens per example (ViT-B/16 against ViT-B/32) send the same bytes while the one with "
        "more compute spends a smaller share of each update communicating.\n"
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

}  // namespace distlm::task4_bench
