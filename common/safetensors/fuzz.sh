#!/usr/bin/env bash
# Builds the safetensors header fuzzer with clang-14 + libFuzzer (ASan, UBSan) outside Bazel and
# runs it for SECONDS (default 180) from the seed corpus. Usage, from anywhere in the checkout:
#   common/safetensors/fuzz.sh [SECONDS] [WORK_DIR]
# Exits non-zero when the fuzzer finds a crash or a broken invariant; the reproducer is left in
# WORK_DIR (default /tmp/safetensors_fuzz) as crash-* / leak-* / timeout-*.
set -euo pipefail
seconds="${1:-180}"
work="${2:-/tmp/safetensors_fuzz}"
cd "$(dirname "$0")/../.."
mkdir -p "$work/corpus"

# The seeds are the hand-assembled files of sample_files.cc; the seed test writes them out.
bazel build //common/safetensors:safetensors_fuzzer_seed_test
DISTLM_FUZZ_SEED_DIR="$work/corpus" bazel-bin/common/safetensors/safetensors_fuzzer_seed_test \
    --gtest_filter='*WritesSeeds*' >/dev/null

clang++-14 -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I. common/safetensors/safetensors_fuzzer.cc common/safetensors/header.cc \
    common/safetensors/header_reader.cc \
    -o "$work/safetensors_fuzzer"

cd "$work"
./safetensors_fuzzer -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 \
    -dict="$OLDPWD/common/safetensors/safetensors_fuzzer.dict" corpus
