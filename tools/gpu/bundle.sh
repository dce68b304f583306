#!/usr/bin/env bash
# Packs the stages, built here against LibTorch 2.11.0 (PyPI's CUDA 13.0 wheel), into one
# folder that runs on a GPU machine with no Bazel and no network, where PyTorch 2.11.0+cu130 is
# installed (its torch/lib and CUDA libraries are used there; nothing of them is packed):
#
#   tools/gpu/bundle.sh [DIR]            # default DIR: .gpu in the checkout (git ignores it)
#   # copy DIR to the GPU machine, then there:
#   DIR/check.sh                         # OUT=FOLDER keeps the logs; TORCH_LIB=... if no python3
#
# DIR holds bin/ (the programs with their runfiles, links resolved), lib/ (the libraries they
# link that are neither glibc's nor LibTorch's: absl, utf8proc, Open MPI, Bazel's own shared
# objects), check.sh, and ref/ (the tiny BERT checkpoint and RTE of ../shared/reference when
# that folder is there; without it check.sh trains on the built-in sample). About 31 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.gpu}
targets=(part1/reference task2b/reference task3/reference task5/reference task6/reference task7/reference
         tools/launch)
# The unit tests and the bench, unless NO_TESTS=1 (a cold build of them is half an hour here;
# check.sh then needs SKIP="units bench").
if [ "${NO_TESTS:-0}" != 1 ]; then
  targets+=(part1/bench common/runtime/device_test common/train/mixed_precision_test
            common/dist/host_staging_group_test common/dist/gloo_process_group_test)
fi

DISTLM_LIBTORCH=$(tools/torch_wheel.sh 2.11.0 | tail -1)
export DISTLM_LIBTORCH
labels=()
for t in "${targets[@]}"; do labels+=("//$(dirname "$t"):$(basename "$t")"); done
bazel build "${labels[@]}" 2>&1 | tail -2
bin=$(bazel info bazel-bin 2>/dev/null)

rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib"
for t in "${targets[@]}"; do
  mkdir -p "$dir/bin/$(dirname "$t")"
  cp -L "$bin/$t" "$dir/bin/$t"
  if [ -d "$bin/$t.runfiles" ]; then cp -rL "$bin/$t.runfiles" "$dir/bin/$t.runfiles"; fi
done
# What the programs link, minus glibc and the C++ runtime (newer on any current system) and
# minus LibTorch and CUDA (the GPU machine's own PyTorch provides them).
for t in "${targets[@]}"; do ldd "$bin/$t"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|librt|libdl|libutil|ld-linux[^/]*)\.so' |
  grep -vE "$DISTLM_LIBTORCH|/nvidia/|/torch/lib/" |
  while read -r lib; do cp -L "$lib" "$dir/lib/"; done
cp tools/gpu/check.sh "$dir/check.sh"
mkdir -p "$dir/peers"  # BERT-base's random checkpoint (and transformers' update time), with its transformers
cp tools/peers/make_checkpoint.py tools/peers/step_common.py tools/peers/hf_step_time.py "$dir/peers/"
ref=../shared/reference
if [ -f "$ref/bert_tiny_reference/model.safetensors" ] && [ -f "$ref/data/RTE/train.tsv" ]; then
  mkdir -p "$dir/ref/RTE"
  cp "$ref"/bert_tiny_reference/{config.json,model.safetensors,vocab.txt} "$dir/ref/"
  cp "$ref"/data/RTE/{train,dev}.tsv "$dir/ref/RTE/"
else
  echo "tools/gpu/bundle.sh: $ref is not here: check.sh will train on the built-in sample" >&2
fi
chmod -R u+w "$dir"
echo "bundle: $dir ($(du -sh "$dir" | cut -f1)); run $dir/check.sh on the GPU machine"
