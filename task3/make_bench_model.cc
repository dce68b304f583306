// Writes a randomly initialised BERT in the HuggingFace layout (config.json,
// model.safetensors, vocab.txt = the built-in vocabulary), for timing the stages on models
// bigger than the built-in tiny one:
//
//   bazel-bin/task3/make_bench_model --output_dir=/tmp/bert_mid --hidden_size=256 --num_hidden_layers=4 --num_attention_heads=4 --intermediate_size=1024
//   bazel-bin/tools/launch --nproc_per_node=4 -- bazel-bin/task3/reference --model_name_or_path=/tmp/bert_mid ...
//
// The weights are meaningless (N(0, 0.02) as BERT initialises); only the sizes matter here.
#include <torch/utils.h>

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/bert/bert_config.h"
#include "common/bert/bert_model.h"
#include "common/bert/checkpoint.h"
#include "common/runtime/errors.h"
#include "common/runtime/runfiles.h"
#include "common/tokenizer/bert_tokenizer.h"

ABSL_FLAG(std::string, output_dir, "", "folder to write (created)");
ABSL_FLAG(int64_t, hidden_size, 256, "hidden size");
ABSL_FLAG(int64_t, num_hidden_layers, 4, "transformer layers");
ABSL_FLAG(int64_t, num_attention_heads, 4, "attention heads (must divide hidden_size)");
ABSL_FLAG(int64_t, intermediate_size, 1024, "feed-forward size");
ABSL_FLAG(uint64_t, seed, 42, "initialisation seed");

int main(int argc, char** argv) {
  return distlm::RunMain([&]() -> int {
    auto rest = absl::ParseCommandLine(argc, argv);
    if (rest.size() > 1) throw distlm::UserError("unexpected argument '" + std::string(rest[1]) + "'");
    const std::string dir = absl::GetFlag(FLAGS_output_dir);
    if (dir.empty()) throw distlm::UserError("--output_dir is required");
    const std::string vocab = distlm::FindRunfile("common/testdata/vocab.txt");
    const auto vocab_size =
        static_cast<int64_t>(distlm::tokenizer::BertTokenizer::FromVocabFile(vocab, true).vocab().size());
    distlm::bert::BertConfig config = distlm::bert::TinyBertConfig(vocab_size);
    config.hidden_size = absl::GetFlag(FLAGS_hidden_size);
    config.num_hidden_layers = absl::GetFlag(FLAGS_num_hidden_layers);
    config.num_attention_heads = absl::GetFlag(FLAGS_num_attention_heads);
    config.intermediate_size = absl::GetFlag(FLAGS_intermediate_size);
    config.Validate("flags");
    torch::manual_seed(absl::GetFlag(FLAGS_seed));
    distlm::bert::BertForSequenceClassification model(config);
    distlm::bert::SavePretrained(dir, model, vocab);
    int64_t params = 0;
    for (const auto& p : model->parameters()) params += p.numel();
    std::printf("wrote %s: hidden %lld, %lld layers, %lld heads, intermediate %lld, %lld parameters (%.2f MiB)\n",
                dir.c_str(), static_cast<long long>(config.hidden_size),
                static_cast<long long>(config.num_hidden_layers), static_cast<long long>(config.num_attention_heads),
                static_cast<long long>(config.intermediate_size), static_cast<long long>(params),
                params * 4.0 / (1 << 20));
    return 0;
  });
}
