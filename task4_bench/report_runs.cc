// The runs of the scaling report: see report_runs.h.
#include "task4_bench/report_runs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <thread>

#include <torch/types.h>
#include <torch/utils.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/bert/bert_config.h"
#include "common/bert/checkpoint.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/runtime/runfiles.h"
#include "common/vit/vit_checkpoint.h"
#include "common/vit/vit_config.h"
#include "common/vit/vit_model.h"

namespace distlm::task4_bench {
namespace {

using Clock = std::chrono::steady_clock;

// Elements a stage communicates for a model of `numel` parameters at world size N: task 5's
// flat buffer is padded to N equal shards.
int64_t CommunicatedNumel(const StageSpec& stage, int64_t numel, int world_size) {
  if (!IsSharded(stage.report.pattern)) return numel;
  return (numel + world_size - 1) / world_size * world_size;
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

// The ViT's data: a generated CIFAR-10-format set of at least `needed` training images.
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

// Draws a base-size model at random (seed 42) and saves it where every rank loads it from.
// A folder already holding config.json and model.safetensors is a previous report's: kept.
template <typename Save>
void SaveOnce(const std::string& dir, Save save) {
  if (PathExists(dir + "/config.json") && PathExists(dir + "/model.safetensors")) return;
  std::printf("report: drawing a random model into %s\n", dir.c_str());
  std::fflush(stdout);
  torch::manual_seed(42);
  save();
}

}  // namespace

std::string ReportModelNames() { return "bert, vit, bert_mid, bert_base, vit_b16, vit_b32"; }

bool IsReportModel(const std::string& name) {
  return name == "bert" || name == "vit" || name == "bert_mid" || name == "bert_base" || name == "vit_b16" ||
         name == "vit_b32";
}

ReportModel MakeReportModel(const Config& c, const std::string& name) {
  if (!IsReportModel(name)) throw UserError("--model: '" + name + "' is not one of " + ReportModelNames());
  ReportModel m;
  m.name = name;
  const std::string data = " with the stages' reference solutions.";
  if (name == "bert" || name == "bert_mid" || name == "bert_base") {
    const std::string vocab_path = FindRunfile("common/testdata/vocab.txt");
    m.tokens_per_example = c.max_seq_length;
    m.dataset = "RTE";
    m.dataset_examples = 2490;  // GLUE RTE's training pairs
    const std::string sample = absl::StrFormat(
        " on the built-in RTE-style sample (repeated), sequence length %d", c.max_seq_length);
    if (name == "bert") {
      m.label = "tiny BERT";
      const std::string vocab = ReadFile(vocab_path);  // the stages' model: TinyBertConfig over it
      m.tensors = GradientTensors(bert::TinyBertConfig(std::count(vocab.begin(), vocab.end(), '\n')));
      m.description = absl::StrFormat(
          "The tiny BERT (hidden 128, 2 layers; %d gradient tensors, %d parameters = %.3f MB in "
          "float32)%s%s", m.tensors.size(), TotalNumel(m.tensors), 4e-6 * TotalNumel(m.tensors), sample, data);
      return m;
    }
    const bool mid = name == "bert_mid";
    m.label = mid ? "BERT-mid" : "BERT-base";
    m.dir = c.out + "/model_" + name;
    bert::BertConfig config = bert::BertBaseCasedConfig();
    if (mid) {  // tools/peers' mid preset: between the tiny model and BERT-base
      config.hidden_size = 384;
      config.num_hidden_layers = 6;
      config.num_attention_heads = 6;
      config.intermediate_size = 1536;
    }
    bert::BertForSequenceClassification model(config);
    SaveOnce(m.dir, [&] {
      model->InitWeights();
      bert::SavePretrained(m.dir, model, vocab_path);
    });
    m.tensors = GradientTensors(*model);
    m.description = absl::StrFormat(
        "A randomly initialised %s (%s, vocabulary 28,996; %d gradient tensors, %d parameters = %.1f MB in "
        "float32; drawn with seed 42 into `model_%s/` and loaded by every rank with --model_name_or_path)%s%s",
        m.label, mid ? "hidden 384, 6 layers, 6 heads, intermediate 1536" : "bert-base-cased's shape: hidden 768, 12 layers",
        m.tensors.size(), TotalNumel(m.tensors), 4e-6 * TotalNumel(m.tensors), name, sample, data);
    return m;
  }
  m.vit = true;
  m.dataset = "CIFAR-10";
  m.dataset_examples = 50000;  // CIFAR-10's training images
  if (name == "vit") {
    vit::ViTForImageClassification model(vit::TinyViTConfig());  // the stages' default ViT, 10 classes
    m.label = "tiny ViT";
    m.tokens_per_example = model->config().num_tokens();
    m.tensors = GradientTensors(*model);
    m.description = absl::StrFormat(
        "The tiny ViT (32x32 images in 8x8 patches: 17 tokens, hidden 64, 2 layers; %d gradient "
        "tensors, %d parameters = %.3f MB in float32) on a generated CIFAR-10-format set%s",
        m.tensors.size(), TotalNumel(m.tensors), 4e-6 * TotalNumel(m.tensors), data);
    return m;
  }
  const int64_t patch = name == "vit_b16" ? 16 : 32;
  m.label = absl::StrFormat("ViT-B/%d", patch);
  m.dir = c.out + "/model_" + name;
  vit::ViTForImageClassification model(vit::ViTBaseConfig(patch));
  SaveOnce(m.dir, [&] {
    model->InitWeights();
    vit::SavePretrainedViT(m.dir, model);
  });
  m.tokens_per_example = model->config().num_tokens();
  m.tensors = GradientTensors(*model);
  m.description = absl::StrFormat(
      "A randomly initialised %s (224x224 images in %dx%d patches: %d tokens, hidden 768, 12 "
      "layers, 10 classes; %d gradient tensors, %d parameters = %.1f MB in float32; drawn with seed 42 into "
      "`model_%s/` and loaded by every rank with --model_name_or_path) on a generated CIFAR-10-format set (32x32 "
      "images resized to 224)%s",
      m.label, patch, patch, m.tokens_per_example, m.tensors.size(), TotalNumel(m.tensors),
      4e-6 * TotalNumel(m.tensors), name, data);
  return m;
}

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

std::string RunSpec::Id() const {
  return absl::StrFormat("%s%s_n%d_%s_b%d_u%d_%s", model->name == "bert" ? "" : model->name + "_", stage->id, ranks,
                         link, batch, updates, comm_dtype);
}

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

RunResult Train(const Env& env, const RunSpec& spec) {
  RunResult res;
  res.dir = env.config.out + "/runs/" + spec.Id();
  MakeDirs(res.dir);
  const std::string binary = FindRunfile(spec.stage->reference_binary());
  std::vector<std::string> stage_flags = {"--per_gpu_train_batch_size=" + std::to_string(spec.batch),
                                          "--max_steps=" + std::to_string(spec.updates),
                                          "--data_dir=" + spec.model->data_dir,
                                          "--do_eval=false",
                                          "--output_dir=" + res.dir,
                                          "--overwrite_output_dir"};
  if (spec.model->vit) {
    stage_flags.insert(stage_flags.end(), {"--model_type=vit", "--task_name=cifar10"});
  } else {
    stage_flags.push_back("--max_seq_length=" + std::to_string(env.config.max_seq_length));
  }
  if (!spec.model->dir.empty()) stage_flags.push_back("--model_name_or_path=" + spec.model->dir);
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
  std::printf("report: %-52s ", spec.Id().c_str());
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

std::string MakeDataDir(const Config& c, const ReportModel& model) {
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
  if (model.vit) return MakeImageDir(c, needed);
  const std::string dir = c.out + "/data";
  MakeDirs(dir);
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

namespace {

// One model and stage: every link and world size, then each row's efficiency against the one-rank
// run on the same link (or loopback's).
void ScaleStage(const Env& env, const ReportModel& model, const StageSpec* stage, std::vector<ScalingRow>* out) {
  const Config& c = env.config;
  std::vector<ScalingRow> rows;
  std::map<std::string, double> throughput_1;  // per link
  for (const std::string& link : c.links) {
    if (link != "loopback" && !env.links_possible) continue;
    for (int n : c.ranks) {
      if (n == 1 && link != "loopback" && throughput_1.count("loopback")) {
        // One rank sends nothing: its link does not matter; the loopback run is the baseline.
        continue;
      }
      ScalingRow row;
      row.spec = {&model, stage, n, link, c.per_rank_batch, c.updates, "fp32"};
      row.result = Train(env, row.spec);
      if (row.result.ok && n == 1) throughput_1[link] = row.result.log.samples_per_s;
      rows.push_back(row);
    }
  }
  for (auto& row : rows) {
    if (!row.result.ok) continue;
    auto it = throughput_1.find(row.spec.link);
    if (it == throughput_1.end()) {
      it = throughput_1.find("loopback");
      row.baseline_from_loopback = true;
    }
    if (it != throughput_1.end()) {
      row.efficiency = ScalingEfficiency(row.result.log.samples_per_s, row.spec.ranks, it->second);
    }
  }
  out->insert(out->end(), rows.begin(), rows.end());
}

}  // namespace

std::vector<ScalingRow> RunScaling(const Env& env) {
  std::vector<ScalingRow> rows;
  for (const ReportModel& model : env.models) {
    for (const StageSpec* stage : env.config.stages) ScaleStage(env, model, stage, &rows);
  }
  return rows;
}

void CompareLosses(std::vector<TrafficRow>& rows) {
  for (auto& r : rows) {
    if (!r.ok || r.comm_dtype == "fp32") continue;
    for (const auto& base : rows) {
      if (!base.ok || base.comm_dtype != "fp32" || base.model != r.model || base.stage != r.stage ||
          base.batch != r.batch || base.losses.size() != r.losses.size()) {
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

TrafficRow MeasureTraffic(const Env& env, const ReportModel& model, const StageSpec* stage, int batch,
                          const std::string& comm_dtype) {
  const Config& c = env.config;
  TrafficRow row;
  row.model = &model;
  row.stage = stage;
  row.ranks = c.traffic_ranks;
  row.batch = batch;
  row.comm_dtype = comm_dtype;
  row.updates = c.traffic_updates;
  RunSpec shorter{&model, stage, c.traffic_ranks, "loopback", batch, c.traffic_updates, comm_dtype};
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
      static_cast<double>(CommunicatedNumel(*stage, TotalNumel(model.tensors), c.traffic_ranks)) *
      CommDtypeBytes(comm_dtype);
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
  const int64_t per_rank = (model.dataset_examples + c.traffic_ranks - 1) / c.traffic_ranks;
  row.updates_per_epoch = (per_rank + batch - 1) / batch;
  return row;
}

}  // namespace distlm::task4_bench
