#!/usr/bin/env bash
# The Gradescope package end to end in a bare Debian 12 root, as Gradescope would use it: the
# package made from this checkout, a root made with debootstrap, /autograder laid out, setup.sh,
# then run_autograder on submissions, each results.json checked.
#
#   grading/gradescope/e2e_debootstrap.sh            # references (full marks on BERT and on the ViT),
#                                                    # stubs (0), two mistakes
#   grading/gradescope/e2e_debootstrap.sh --smoke    # the references only (what CI runs)
#   grading/gradescope/e2e_debootstrap.sh --reuse=DIR  # grade again in a root kept by --keep
#   grading/gradescope/e2e_debootstrap.sh --wheel=2.11.0  # the package linked against PyPI's
#       torch wheel (tools/torch_wheel.sh), which setup.sh installs with pip: the route for a base
#       image without Debian's LibTorch
#
# Needs root, debootstrap (installed if missing) and a Debian mirror (DISTLM_DEBIAN_MIRROR,
# default deb.debian.org). With --share_cache the root's Bazel uses this machine's disk cache
# (~/.cache/distlm/bazel-disk) and apt's downloads, so setup.sh does not compile or download
# what this machine has (with --wheel, this machine's installed wheel too); without it setup.sh
# starts from nothing, as on Gradescope. The root gets this machine's pip configuration and CA
# bundle (PyPI may be reached through a proxy here).
# Prints each step's time and "e2e: N of N submissions graded as expected". Exits 0 when all
# were, 1 when one was not (or the package or setup.sh failed), 3 when no root could be made
# (not root, no debootstrap, no mirror).
set -euo pipefail
cd "$(dirname "$0")/../.."
checkout=$(pwd)

smoke=0 share=0 keep=0 reuse= wheel=
for arg in "$@"; do
  case "$arg" in
    --smoke) smoke=1 ;;
    --share_cache) share=1 ;;
    --keep) keep=1 ;;
    --reuse=*) reuse=${arg#--reuse=} keep=1 ;;
    --wheel=*) wheel=${arg#--wheel=} ;;
    *) echo "usage: $0 [--smoke] [--share_cache] [--keep] [--reuse=DIR] [--wheel=VERSION]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "e2e: needs root (debootstrap, chroot, mounts): not run" >&2; exit 3; }
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null || {
  echo "e2e: debootstrap is not installed and could not be" >&2
  exit 3
}

work=${reuse:-$(mktemp -d /tmp/distlm_e2e.XXXXXX)}
root=$work/root
cleanup() {
  for m in "$root/root/.cache/distlm/bazel-disk" "$root/opt/distlm/torch-$wheel" "$root/var/cache/apt/archives" "$root/dev" "$root/sys" "$root/proc" "$root"; do
    if mountpoint -q "$m" 2>/dev/null; then umount -R "$m" 2>/dev/null || umount -lR "$m" 2>/dev/null || true; fi
  done
  if [ "$keep" -eq 1 ]; then
    echo "e2e: kept $work"
  elif grep -q " $work/" /proc/self/mounts; then
    # Never delete through a mount (the root holds this machine's /dev and /sys).
    echo "e2e: mounts remain under $work; left in place" >&2
  else
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT
step_start=$(date +%s)
step() {
  local now
  now=$(date +%s)
  echo "e2e: $1 ($((now - step_start)) s)"
  step_start=$now
}

# The stages, their files and points, from the one table (common/stages/stages.bzl, as JSON).
bazel build //common/stages:stages_json >"$work/stages_json.log" 2>&1 || {
  tail -20 "$work/stages_json.log"
  exit 1
}
stages_json=$(bazel info bazel-bin 2>/dev/null)/common/stages/stages.json
# facts EXPR: a Python expression over `t` (stages.json) and `stage` (id -> row), printed.
facts() {
  python3 - "$stages_json" "$1" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
stage = {s["id"]: s for s in t["stages"]}
r = eval(sys.argv[2])
print("\n".join(map(str, r)) if isinstance(r, list) else r)
PY
}

if [ -z "$reuse" ]; then
  libtorch=
  if [ -n "$wheel" ]; then
    libtorch=$(tools/torch_wheel.sh "$wheel" | tail -1) || exit 1
  fi
  DISTLM_LIBTORCH=$libtorch bazel run //grading:gradescope_package -- --out="$work/package" >"$work/package.log" 2>&1 || {
    tail -20 "$work/package.log"
    exit 1
  }
  zip=$work/package/autograder.zip
  step "package made: $(du -k "$zip" | cut -f1) KiB"
  debootstrap --variant=minbase bookworm "$root" "${DISTLM_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 || {
    tail -20 "$work/debootstrap.log"
    echo "e2e: debootstrap failed: no Debian 12 root" >&2
    exit 3
  }
  step "Debian 12 root made"
fi

mkdir -p "$root/autograder/source" "$root/autograder/submission" "$root/autograder/results"
apt_root() { chroot "$root" env DEBIAN_FRONTEND=noninteractive "$@"; }
# The root a mount of its own, as a container's is (the grader's jail makes / private in its
# namespace, which needs / to be a mount point), private so that nothing propagates back here.
mount --bind "$root" "$root"
mount --make-private "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
if [ "$share" -eq 1 ]; then
  mkdir -p "$root/root/.cache/distlm/bazel-disk" "$HOME/.cache/distlm/bazel-disk"
  mount --bind "$HOME/.cache/distlm/bazel-disk" "$root/root/.cache/distlm/bazel-disk"
  mount --bind /var/cache/apt/archives "$root/var/cache/apt/archives"
  if [ -n "$wheel" ] && [ -f "$HOME/.cache/distlm/torch-$wheel/.complete" ]; then
    mkdir -p "$root/opt/distlm/torch-$wheel"
    mount --bind "$HOME/.cache/distlm/torch-$wheel" "$root/opt/distlm/torch-$wheel"
  fi
fi
if [ -n "$wheel" ]; then
  # This machine's way to PyPI (a proxy's CA, an index), as any machine's would be configured.
  [ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
  mkdir -p "$root/etc/ssl/certs"
  [ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$root/etc/distlm-host-ca.crt"
fi
if [ -z "$reuse" ]; then
  # What Gradescope's base image has before setup.sh: unzip to unpack the zip, ca-certificates.
  apt_root apt-get update -qq >/dev/null
  apt_root apt-get install -y -qq --no-install-recommends unzip ca-certificates >/dev/null
  cp "$zip" "$root/autograder/autograder.zip"
  chroot "$root" unzip -q /autograder/autograder.zip -d /autograder/source
  setup_start=$(date +%s)
  pip_env=()
  if [ -n "$wheel" ] && [ -f "$root/etc/distlm-host-ca.crt" ]; then
    pip_env=(PIP_CERT=/etc/distlm-host-ca.crt)
    [ -n "${PIP_INDEX_URL:-}" ] && pip_env+=(PIP_INDEX_URL="$PIP_INDEX_URL")
  fi
  chroot "$root" env "${pip_env[@]}" bash -c 'cd /autograder/source && bash setup.sh' >"$work/setup.log" 2>&1 || {
    tail -30 "$work/setup.log"
    exit 1
  }
  step "setup.sh ran in $(($(date +%s) - setup_start)) s"
fi

# One grading: the files of `from` (reference/ or student/, "" for none) for every stage, with
# `edit` (a sed expression on one file: STAGE:FILE:EXPR) applied; then checks with python3.
# $model (bert unless set) is the grader's --model_type, through run_autograder's DISTLM_MODEL_TYPE;
# the points in all are stages.json's total for that model.
passed=0 total=0
grade() {
  local name=$1 from=$2 edit=$3 want_score=$4 want_text=$5
  rm -rf "$root/autograder/submission" "$root/autograder/results"
  mkdir -p "$root/autograder/submission" "$root/autograder/results"
  # Every stage's files, ID:FILE (a stage's id is its folder).
  local ids
  ids=$(facts '["%s:%s" % (s["id"], f) for s in t["stages"] for f in s["files"]]')
  [ -n "$ids" ] || { echo "e2e: no stage rows read from $stages_json"; exit 2; }
  for entry in $ids; do
    IFS=: read -r id file <<<"$entry"
    mkdir -p "$root/autograder/submission/$id"
    cp "$checkout/$id/$from/$file" "$root/autograder/submission/$id/$file"
  done
  if [ -n "$edit" ]; then
    IFS=: read -r id file expr <<<"$edit"
    sed -i "$expr" "$root/autograder/submission/$id/$file"
  fi
  local start
  start=$(date +%s)
  chroot "$root" env DISTLM_MODEL_TYPE="${model:-bert}" /autograder/source/run_autograder >"$work/grade_$name.log" 2>&1 ||
    true
  total=$((total + 1))
  local want_total
  want_total=$(facts "t['total']['${model:-bert}']")
  if python3 - "$root/autograder/results/results.json" "$want_score" "$want_text" "$want_total" <<'EOF'; then
import json, sys
path, want_score, want_text, want_total = sys.argv[1], float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
r = json.load(open(path))
problems = []
for key in ("score", "execution_time", "tests"):
    if key not in r:
        problems.append("no " + key)
for t in r.get("tests", []):
    for key in ("name", "score", "max_score", "output", "visibility"):
        if key not in t:
            problems.append("a test without " + key + ": " + json.dumps(t)[:200])
if r.get("score") != want_score:
    problems.append("score %s, expected %s" % (r.get("score"), want_score))
if want_text and want_text not in json.dumps(r):
    problems.append("no '%s' in results.json" % want_text)
if sum(t.get("max_score", 0) for t in r.get("tests", [])) != want_total:
    problems.append("the points are not %g in all" % want_total)
for p in problems:
    print("e2e:   " + p)
sys.exit(1 if problems else 0)
EOF
    passed=$((passed + 1))
    step "$name: graded as expected in $(($(date +%s) - start)) s"
  else
    tail -20 "$work/grade_$name.log"
    step "$name: NOT as expected (after $(($(date +%s) - start)) s)"
  fi
}

full=$(facts "t['total']['bert']")
grade references reference "" "$full" "in its own mount, IPC and network namespaces"
if [ "$smoke" -eq 0 ]; then
  grade stubs student "" 0 "still calls StudentTodo"
  # Summed but not averaged: 2b's parity test fails (its collectives test still passes).
  grade sum_without_average reference "task2b:grad_sync.cc:s/div_(pg.getSize())/div_(1)/" \
    "$(facts "t['total']['bert'] - stage['task2b']['parity_points']")" \
    "summed but not divided by the world size"
  grade compile_error reference 'task2a:grad_sync.cc:$a int this_does_not_compile = ;' \
    "$(facts "t['total']['bert'] - stage['task2a']['points']")" "does not compile"
  # The package's image writer and the shared read-only data in the jail, on a bare root.
  model=vit grade references_vit reference "" "$(facts "t['total']['vit']")" "every run trained the tiny ViT"
fi
echo "e2e: $passed of $total submissions graded as expected"
[ "$passed" -eq "$total" ]
