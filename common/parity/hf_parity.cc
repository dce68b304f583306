#include "common/parity/hf_parity.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include "common/bert/checkpoint.h"
#include "common/data/batch.h"
#include "common/glue/features.h"
#include "common/glue/processors.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/safetensors/safetensors.h"
#include "common/tokenizer/bert_tokenizer.h"
#include "common/train/bert_adamw.h"
#include "common/train/schedule.h"

namespace distlm::bert {
namespace {

using Named = std::map<std::string, torch::Tensor>;

std::string Shape(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

std::string Fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), format, a, b, c);
  return buf;
}

// A check that cannot be made: the shapes differ.
bool ShapesDiffer(const torch::Tensor& got, const torch::Tensor& want, ParityCheck* c) {
  if (got.sizes() == want.sizes()) return false;
  c->worst = std::numeric_limits<double>::infinity();
  c->detail = "shape " + Shape(got) + " in distlm, " + Shape(want) + " in the dump";
  return true;
}

// Element-wise comparison: the worst |got - want| against relative * scale, where the scale is
// the reference tensor's largest |value| (or `floor`, when that is larger).
ParityCheck CompareValues(const std::string& name, const torch::Tensor& got, const torch::Tensor& want,
                          double relative, double floor = 0) {
  ParityCheck c;
  c.name = name;
  if (ShapesDiffer(got, want, &c)) return c;
  auto g = got.detach().to(torch::kCPU, torch::kDouble).reshape(-1);
  auto w = want.to(torch::kDouble).reshape(-1);
  const double scale = std::max(w.numel() ? w.abs().max().item<double>() : 0.0, floor);
  c.limit = relative * scale;
  if (g.numel() == 0) return c;
  auto diff = (g - w).abs();
  const int64_t at = diff.argmax().item<int64_t>();
  c.worst = diff[at].item<double>();
  if (!std::isfinite(c.worst)) c.worst = std::numeric_limits<double>::infinity();
  c.detail = Fmt("scale %.3g; worst at element %.0f: distlm %.9g", scale, static_cast<double>(at),
                 g[at].item<double>()) +
             Fmt(", transformers %.9g", w[at].item<double>());
  return c;
}

// Integer tensors must be equal; worst counts the rows that differ.
ParityCheck CompareRows(const std::string& name, const torch::Tensor& got, const torch::Tensor& want) {
  ParityCheck c;
  c.name = name;
  if (ShapesDiffer(got, want, &c)) return c;
  auto rows_differ = got.to(torch::kLong).ne(want.to(torch::kLong)).reshape({got.size(0), -1}).any(1);
  c.worst = rows_differ.sum().item<double>();
  c.detail = Fmt("%.0f of %.0f rows differ", c.worst, static_cast<double>(got.size(0)));
  if (c.worst > 0) c.detail += "; first is row " + std::to_string(rows_differ.nonzero()[0][0].item<int64_t>());
  return c;
}

const torch::Tensor& Need(const Named& dump, const std::string& name, const std::string& source) {
  auto it = dump.find(name);
  if (it == dump.end()) throw UserError(source + ": no tensor '" + name + "' (was it written by tools/peers/hf_dump.py?)");
  return it->second;
}

// Batch k of hf_dump's run: rows (k * B + j) mod n, in file order, padded to max_seq_length.
data::Batch BatchAt(const data::FeatureTensors& all, int64_t k, int64_t batch) {
  std::vector<int64_t> idx;
  for (int64_t j = 0; j < batch; ++j) idx.push_back((k * batch + j) % all.size());
  return data::MakeBatch(all, idx, /*trim_padding=*/false);
}

// distlm's own features of the folder's data/train.tsv.
data::FeatureTensors Featurize(const std::string& model_dir, int64_t max_seq_length, bool lower) {
  auto processor = glue::MakeProcessor("rte");
  auto examples = processor->GetExamples(model_dir + "/data/train.tsv", glue::Split::kTrain);
  auto tok = tokenizer::BertTokenizer::FromVocabFile(model_dir + "/vocab.txt", lower);
  return data::ToTensors(
      glue::ConvertExamplesToFeatures(examples, processor->GetLabels(), static_cast<int>(max_seq_length), tok));
}

// A dropout-free model with the parameters the Python run started from.
BertForSequenceClassification StartingModel(const std::string& model_dir, const Named& dump, const std::string& source,
                                            std::vector<ParityCheck>* checks) {
  BertConfig config = LoadBertConfig(model_dir + "/config.json");
  config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0;
  config.num_labels = Need(dump, "init.classifier.weight", source).size(0);
  BertForSequenceClassification model(config);
  std::vector<std::pair<std::string, torch::Tensor>> init;
  for (const auto& [name, t] : dump) {
    if (name.rfind("init.", 0) == 0) init.emplace_back(name.substr(5), t);
  }
  LoadReport report = LoadStateDict(model, init, source);
  if (checks) {
    ParityCheck c;
    c.name = "init (every parameter from the dump)";
    c.worst = static_cast<double>(report.newly_initialized.size());
    c.detail = std::to_string(init.size()) + " tensors; " + std::to_string(report.newly_initialized.size()) +
               " parameters missing" + (report.newly_initialized.empty() ? "" : " (first " + report.newly_initialized[0] + ")") +
               ", " + std::to_string(report.unused.size()) + " unused";
    checks->push_back(c);
  }
  return model;
}

std::vector<double> Doubles(const torch::Tensor& t) {
  auto d = t.to(torch::kDouble).contiguous();
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

}  // namespace

bool ParityReport::all_ok() const { return failures() == 0 && !checks.empty(); }

int ParityReport::failures() const {
  return static_cast<int>(std::count_if(checks.begin(), checks.end(), [](const ParityCheck& c) { return !c.ok(); }));
}

std::string FormatCheck(const ParityCheck& c) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "worst %.3g <= %.3g", c.worst, c.limit);
  std::string line = std::string(c.ok() ? "OK     " : "NOT OK ") + c.name + "  ";
  if (!c.ok()) std::snprintf(buf, sizeof(buf), "worst %.3g > %.3g", c.worst, c.limit);
  return line + buf + (c.detail.empty() ? "" : "  (" + c.detail + ")");
}

ParityReport CompareWithHfDump(const std::string& dump_dir, const std::string& model_dir_arg,
                               const ParityTolerances& tol) {
  const std::string meta_path = dump_dir + "/meta.json";
  const std::string dump_path = dump_dir + "/dump.safetensors";
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(ReadFile(meta_path));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(meta_path + ": not valid JSON (" + e.what() + ")");
  }
  const auto& s = meta.at("settings");
  ParityReport report;
  report.dump_dir = dump_dir;
  report.model_dir = model_dir_arg.empty() ? meta.at("model_dir").get<std::string>() : model_dir_arg;
  const std::string& model_dir = report.model_dir;
  // A dump made on another machine (or before its model folder was removed) names a folder
  // that is not here: say how to make a fresh one rather than fail on a missing config.json.
  if (!std::filesystem::is_directory(model_dir)) {
    throw UserError(meta_path + " names the model folder " + model_dir +
                    ", which is not here: regenerate the dumps with tools/peers/make_dumps.sh (or pass --model)");
  }
  const int64_t B = s.at("batch_size").get<int64_t>(), S = s.at("max_seq_length").get<int64_t>(),
                steps = s.at("steps").get<int64_t>();
  const double lr = s.at("lr").get<double>(), max_norm = s.at("max_grad_norm").get<double>();
  const bool lower = s.at("do_lower_case").get<int64_t>() != 0;

  Named dump;
  for (auto& [name, t] : safetensors::LoadFile(dump_path, /*to_float32=*/false)) dump.emplace(name, t);
  auto& checks = report.checks;

  // 1. The tokenizer: distlm's features of the first batch against BertTokenizerFast's.
  const data::FeatureTensors f = Featurize(model_dir, S, lower);
  const data::Batch first = BatchAt(f, 0, B);
  checks.push_back(CompareRows("input_ids", first.input_ids, Need(dump, "input_ids", dump_path)));
  checks.push_back(CompareRows("token_type_ids", first.segment_ids, Need(dump, "token_type_ids", dump_path)));
  checks.push_back(CompareRows("attention_mask", first.input_mask, Need(dump, "attention_mask", dump_path)));
  checks.push_back(CompareRows("labels", first.labels.unsqueeze(1), Need(dump, "labels", dump_path).unsqueeze(1)));

  // 2. Forward and backward of the first batch (the dump's own features, so a tokenizer
  // difference above does not hide a model difference here).
  auto ids = Need(dump, "input_ids", dump_path), seg = Need(dump, "token_type_ids", dump_path),
       mask = Need(dump, "attention_mask", dump_path), labels = Need(dump, "labels", dump_path);
  {
    auto model = StartingModel(model_dir, dump, dump_path, &checks);
    model->train();
    auto out = model(ids, seg, mask, labels);
    checks.push_back(CompareValues("logits", out.logits, Need(dump, "logits", dump_path), tol.logits));
    checks.push_back(CompareValues("loss", out.loss.reshape(1), Need(dump, "loss", dump_path), tol.logits));
    checks.push_back(CompareValues("logits vs transformers' SDPA attention", out.logits,
                                   Need(dump, "logits_sdpa", dump_path), tol.logits));
    out.loss.backward();
    // Some gradients are zero in exact arithmetic (the attention key biases: softmax ignores a
    // per-row constant), so both sides hold float noise there; such tensors are judged against
    // a thousandth of the largest gradient scale rather than their own noise.
    double global = 0;
    for (const auto& p : model->named_parameters()) {
      global = std::max(global, Need(dump, "grad." + p.key(), dump_path).abs().max().item<double>());
    }
    for (const auto& p : model->named_parameters()) {
      const torch::Tensor& g = p.value().grad();
      checks.push_back(CompareValues("grad." + p.key(), g.defined() ? g : torch::zeros_like(p.value()),
                                     Need(dump, "grad." + p.key(), dump_path), tol.gradient, 1e-3 * global));
    }
  }

  // 3. The trace: the same batches, torch.optim.AdamW semantics, clipping, linear decay.
  {
    auto model = StartingModel(model_dir, dump, dump_path, nullptr);
    model->train();
    std::vector<std::pair<std::string, torch::Tensor>> named;
    std::vector<torch::Tensor> params;
    for (const auto& p : model->named_parameters()) {
      named.emplace_back(p.key(), p.value());
      params.push_back(p.value());
    }
    train::AdamWOptions adam;
    adam.lr = lr;
    adam.torch_semantics = true;
    train::BertAdamW opt(named, adam);
    train::LinearSchedule schedule(lr, steps, 0);
    opt.set_lr(schedule.current_lr());
    std::vector<double> losses, norms, lrs;
    for (int64_t k = 0; k < steps; ++k) {
      const data::Batch b = BatchAt(f, k, B);
      auto out = model(b.input_ids, b.segment_ids, b.input_mask, b.labels);
      out.loss.backward();
      norms.push_back(train::ClipGradNorm(params, max_norm));
      lrs.push_back(opt.lr());
      losses.push_back(out.loss.item<double>());
      opt.Step();
      opt.set_lr(schedule.Step());
      opt.ZeroGrad();
    }
    auto want_loss = Need(dump, "trace.loss", dump_path), want_norm = Need(dump, "trace.grad_norm", dump_path);
    // A trace amplifies rounding: transformers' own two attention paths (eager, SDPA) drift
    // apart over the run, by ~4e-5 on BERT-base at this learning rate. Where the dump has that
    // second run, the limit is the larger of the tolerance and kSpreadFactor times transformers'
    // own spread: an implementation on another BLAS (LibTorch 1.13's OpenBLAS against the dump's
    // MKL) rounds every product differently, not only attention's.
    constexpr double kSpreadFactor = 4.0;
    auto spread = [&](const std::string& sdpa_name, const torch::Tensor& eager, bool per_element) -> double {
      auto it = dump.find(sdpa_name);
      if (it == dump.end() || it->second.sizes() != eager.sizes()) return 0.0;
      auto a = it->second.to(torch::kDouble), b = eager.to(torch::kDouble);
      if (per_element) return ((a - b).abs() / b.abs().clamp_min(1e-30)).max().item<double>();
      return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item<double>();
    };
    auto trace_limit = [&](double own_spread, std::string* detail) {
      if (own_spread <= 0) return tol.trace;
      *detail += Fmt("; limit max(%.0e, %.0f x transformers' eager/SDPA spread %.2g)", tol.trace, kSpreadFactor, own_spread);
      return std::max(tol.trace, kSpreadFactor * own_spread);
    };
    // Each step's value against its own size: a trace is a sequence of scalars.
    auto per_step = [&](const std::string& name, const std::vector<double>& got, const torch::Tensor& want,
                        const std::string& sdpa_name) {
      ParityCheck c;
      c.name = name;
      c.limit = tol.trace;
      const std::vector<double> w = Doubles(want);
      if (w.size() != got.size()) {
        c.worst = std::numeric_limits<double>::infinity();
        c.detail = std::to_string(got.size()) + " steps in distlm, " + std::to_string(w.size()) + " in the dump";
      } else if (!got.empty()) {
        size_t at = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          const double rel = std::abs(got[i] - w[i]) / std::max(std::abs(w[i]), 1e-30);
          if (!(rel <= c.worst)) c.worst = std::isfinite(rel) ? rel : std::numeric_limits<double>::infinity(), at = i;
        }
        c.detail = "relative, per step; worst at update " + std::to_string(at + 1) +
                   Fmt(": distlm %.9g, transformers %.9g", got[at], w[at]);
        if (!sdpa_name.empty()) c.limit = trace_limit(spread(sdpa_name, want, true), &c.detail);
      }
      checks.push_back(c);
    };
    per_step("trace.loss (" + std::to_string(steps) + " updates)", losses, want_loss, "trace_sdpa.loss");
    per_step("trace.grad_norm", norms, want_norm, "trace_sdpa.grad_norm");
    per_step("trace.lr", lrs, Need(dump, "trace.lr", dump_path), "");
    model->eval();
    torch::NoGradGuard no_grad;
    auto final_logits = model(ids, seg, mask).logits;
    const auto& want_final = Need(dump, "trace.final_logits", dump_path);
    ParityCheck c = CompareValues("trace.final_logits", final_logits, want_final, tol.trace);
    const double own = spread("trace_sdpa.final_logits", want_final, false);
    if (own > 0 && std::isfinite(c.worst)) {
      const double scale = want_final.abs().max().item<double>();
      c.limit = scale * trace_limit(own, &c.detail);
    }
    checks.push_back(c);
  }
  return report;
}

}  // namespace distlm::bert
