#!/usr/bin/env bash
# Builds the project's four libFuzzer targets with clang-14 (ASan + UBSan) and runs each for
# SECONDS (default 20): the safetensors header parser, the TSV row reader, the tokenizer and
# the grader's reader of a submission's train_log.jsonl.
# gcc, Bazel's toolchain here, has no libFuzzer, so these build outside Bazel. Exits non-zero
# when a fuzzer finds a crash or a broken invariant (the reproducer stays in WORK_DIR).
#   tools/fuzz/run_fuzzers.sh [SECONDS] [WORK_DIR]
set -euo pipefail
seconds="${1:-20}"
work="${2:-${TMPDIR:-/tmp}/distlm_fuzz}"
src=$(cd "$(dirname "$0")/../.." && pwd)
command -v clang++-14 >/dev/null || { echo "run_fuzzers: clang++-14 missing (tools/setup.sh installs it)" >&2; exit 2; }
rm -rf "$work" && mkdir -p "$work"

flags=(-g -O1 -std=c++17 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined "-I$src")
tok=("$src"/common/tokenizer/{unicode,vocab,basic_tokenizer,wordpiece,bert_tokenizer}.cc "$src/common/runtime/atomic_file.cc")

echo "run_fuzzers: building with clang++-14"
clang++-14 "${flags[@]}" "$src/common/safetensors/safetensors_fuzzer.cc" "$src/common/safetensors/header.cc" \
  -o "$work/safetensors_fuzzer"
clang++-14 "${flags[@]}" "$src/common/tokenizer/tokenizer_fuzzer.cc" "${tok[@]}" -lutf8proc -o "$work/tokenizer_fuzzer"
clang++-14 "${flags[@]}" "$src/common/glue/tsv_fuzzer.cc" "$src"/common/glue/{tsv,processors,features}.cc "${tok[@]}" \
  -lutf8proc -o "$work/tsv_fuzzer"

clang++-14 "${flags[@]}" "$src/grading/train_log_fuzzer.cc" "$src"/grading/{train_log,trace,text}.cc \
  -o "$work/train_log_fuzzer"

cp -r "$src/common/tokenizer/fuzz_corpus" "$work/corpus_tokenizer"
cp -r "$src/grading/fuzz_corpus" "$work/corpus_train_log"
cp -r "$src/common/glue/fuzz_corpus" "$work/corpus_tsv"
mkdir -p "$work/corpus_safetensors"
# The safetensors seeds are the hand-built files of sample_files.cc, written by its seed test.
(cd "$src" && bazel build //common/safetensors:safetensors_fuzzer_seed_test >/dev/null 2>&1 &&
  DISTLM_FUZZ_SEED_DIR="$work/corpus_safetensors" bazel-bin/common/safetensors/safetensors_fuzzer_seed_test \
    --gtest_filter='*WritesSeeds*' >/dev/null) || echo "run_fuzzers: no safetensors seeds (starting from empty)"

status=0
cd "$work"
for f in safetensors:65536 tokenizer:512 tsv:1024 train_log:4096; do
  name=${f%%:*}
  max_len=${f##*:}
  extra=()
  [ "$name" = safetensors ] && extra=(-dict="$src/common/safetensors/safetensors_fuzzer.dict")
  echo "run_fuzzers: $name for ${seconds}s"
  if ! "./${name}_fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len="$max_len" "${extra[@]}" \
      "corpus_$name" > "$name.log" 2>&1; then
    echo "run_fuzzers: $name FAILED; see $work/$name.log and the crash-* file there" >&2
    tail -20 "$name.log" >&2
    status=1
  else
    echo "run_fuzzers: $name ok ($(grep -o 'Done [0-9]* runs' "$name.log" | tail -1))"
  fi
done
exit $status
