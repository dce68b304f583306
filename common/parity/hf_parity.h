// distlm against a dump of HuggingFace transformers (tools/peers/hf_dump.sh): the features of
// the first batch, eval logits and loss, every parameter's whole gradient, SDPA's logits, and a
// 12-step torch.optim.AdamW trace, each checked tensor by tensor, llm.c-style.
//
// The dump holds the parameters the Python run started from (`init.<name>`, so a classifier the
// checkpoint lacks starts the same on both sides). distlm recomputes everything else itself:
// its tokenizer turns the folder's data/train.tsv into features, its model runs forward and
// backward, and the trace goes through BertAdamW (--optim=adamw_torch), ClipGradNorm and
// LinearSchedule, the pieces every stage's update is made of.
#pragma once

#include <string>
#include <vector>

namespace distlm::bert {

// One compared quantity.
struct ParityCheck {
  std::string name;     // e.g. "grad.bert.encoder.layer.0.output.dense.weight"
  double worst = 0;     // the largest difference found (absolute)
  double limit = 0;     // what it had to stay within (absolute)
  std::string detail;   // where the worst difference is, the scale it was judged against
  bool ok() const { return worst <= limit; }
};

struct ParityReport {
  std::string dump_dir, model_dir;
  std::vector<ParityCheck> checks;
  bool all_ok() const;
  int failures() const;
};

// Tolerances, relative: logits and loss 1e-5 of their scale (the largest |value|); each
// gradient element 1e-4 of its tensor's scale; the trace 1e-4, or 4 times transformers' own
// spread between its eager and SDPA runs of the same trace when that is larger (a trace
// amplifies rounding; see hf_parity.cc).
struct ParityTolerances {
  double logits = 1e-5;
  double gradient = 1e-4;
  double trace = 1e-4;
};

// Reads dump_dir/meta.json and dump_dir/dump.safetensors; model_dir "" takes the dump's own
// (meta.json's model_dir). Runs on the calling thread's LibTorch settings. Throws UserError
// naming the file for a missing or malformed dump.
ParityReport CompareWithHfDump(const std::string& dump_dir, const std::string& model_dir = "",
                               const ParityTolerances& tolerances = {});

// "OK     name  worst 1.2e-08 <= 3.4e-06  (detail)" or "NOT OK ...".
std::string FormatCheck(const ParityCheck& check);

}  // namespace distlm::bert
