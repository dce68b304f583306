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
# Two at a time, as the fuzzers run below (this machine's two cores; nothing else runs then).
build_status=0
build() {  # OUTPUT SOURCES... [-l...]
  local out=$1
  shift
  clang++-14 "${flags[@]}" "$@" -o "$work/$out" >"$work/$out.build.log" 2>&1 ||
    { cat "$work/$out.build.log" >&2; return 1; }
}
build safetensors_fuzzer "$src/common/safetensors/safetensors_fuzzer.cc" "$src"/common/safetensors/{header,header_reader}.cc &
build tokenizer_fuzzer "$src/common/tokenizer/tokenizer_fuzzer.cc" "${tok[@]}" -lutf8proc &
wait -n || build_status=1
wait -n || build_status=1
build tsv_fuzzer "$src/common/glue/tsv_fuzzer.cc" "$src"/common/glue/{tsv,processors,features}.cc "${tok[@]}" -lutf8proc &
build train_log_fuzzer "$src/grading/train_log_fuzzer.cc" "$src"/grading/{train_log,trace,text}.cc &
wait -n || build_status=1
wait -n || build_status=1
[ "$build_status" -eq 0 ] || { echo "run_fuzzers: a fuzzer did not build" >&2; exit 2; }

cp -r "$src/common/tokenizer/fuzz_corpus" "$work/corpus_tokenizer"
cp -r "$src/grading/fuzz_corpus" "$work/corpus_train_log"
cp -r "$src/common/glue/fuzz_corpus" "$work/corpus_tsv"
mkdir -p "$work/corpus_safetensors"
# The safetensors seeds are the hand-built files of sample_files.cc, written by its seed test.
(cd "$src" && bazel build //common/safetensors:safetensors_fuzzer_seed_test >/dev/null 2>&1 &&
  DISTLM_FUZZ_SEED_DIR="$work/corpus_safetensors" bazel-bin/common/safetensors/safetensors_fuzzer_seed_test \
    --gtest_filter='*WritesSeeds*' >/dev/null) || echo "run_fuzzers: no safetensors seeds (starting from empty)"

cd "$work"
fuzz() {  # NAME MAX_LEN: one fuzzer for $seconds; its verdict in $name.verdict
  local name=$1 max_len=$2 extra=()
  [ "$name" = safetensors ] && extra=(-dict="$src/common/safetensors/safetensors_fuzzer.dict")
  if ! "./${name}_fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len="$max_len" "${extra[@]}" \
      "corpus_$name" > "$name.log" 2>&1; then
    { echo "run_fuzzers: $name FAILED; see $work/$name.log and the crash-* file there"; tail -20 "$name.log"; } >"$name.verdict"
  else
    echo "run_fuzzers: $name ok ($(grep -o 'Done [0-9]* runs' "$name.log" | tail -1))" >"$name.verdict"
  fi
}
# Two at a time: four fuzzers of $seconds each take 2 x $seconds on two cores.
echo "run_fuzzers: safetensors, tokenizer, tsv, train_log for ${seconds}s each, two at a time"
fuzz safetensors 65536 & fuzz tokenizer 512 & wait
fuzz tsv 1024 & fuzz train_log 4096 & wait
status=0
for name in safetensors tokenizer tsv train_log; do
  cat "$name.verdict"
  grep -q "^run_fuzzers: $name ok" "$name.verdict" || status=1
done
exit $status
