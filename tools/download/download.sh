#!/usr/bin/env bash
# tools/download: fetches bert-base-cased (config, vocab, safetensors) and GLUE RTE from their
# official locations, with a progress bar and SHA-256 checks, into --dest; for the second model
# family, CIFAR-10's binary release and the ViT-B/16 checkpoint, when named.
#
#   bazel run //tools/download -- --dest=$HOME/distlm_data [--what=all|bert-base-cased|rte|cifar10|vit-base-patch16-224]
#        [--mirror=URL_PREFIX] [--manifest=FILE]
#
# all: bert-base-cased and rte (the BERT course); cifar10 (170 MB) and vit-base-patch16-224
# (350 MB) only when named.
#
# --mirror replaces each URL's scheme and host (https://huggingface.co/... becomes
# URL_PREFIX/huggingface.co/...), for a local or institutional mirror; file:// works.
# Files are downloaded to a temporary name and renamed only once their checksum is right, so a
# failed or interrupted download never leaves a file that looks complete. Files already present
# with the right checksum are skipped. RTE.zip is unpacked into <dest>/RTE/, CIFAR-10's tar.gz
# into <dest>/cifar-10-batches-bin/ (the --data_dir of --task_name=cifar10).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
manifest="$here/manifest.tsv"
dest=""
what="all"
mirror=""
pin=0

die() { echo "download: $*" >&2; exit 2; }

for arg in "$@"; do
  case "$arg" in
    --dest=*) dest=${arg#--dest=} ;;
    --what=*) what=${arg#--what=} ;;
    --mirror=*) mirror=${arg#--mirror=} ;;
    --manifest=*) manifest=${arg#--manifest=} ;;
    --pin) pin=1 ;;
    -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
[ -n "$dest" ] || die "--dest=DIR is required"
case "$what" in all|bert-base-cased|rte|cifar10|vit-base-patch16-224) ;;
  *) die "--what must be all, bert-base-cased, rte, cifar10 or vit-base-patch16-224, got '$what'" ;; esac
[ -f "$manifest" ] || die "manifest $manifest not found"
if [ -n "${BUILD_WORKING_DIRECTORY:-}" ] && [ "${dest#/}" = "$dest" ]; then dest="$BUILD_WORKING_DIRECTORY/$dest"; fi
mkdir -p "$dest" || die "cannot create $dest"
sums="$dest/SHA256SUMS"
touch "$sums"

progress=(--progress-bar)
[ -t 2 ] || progress=(--silent --show-error)

fetched=0
while IFS=$'\t' read -r name url rel sha; do
  case "$name" in ''|'#'*) continue ;; esac
  if [ "$what" = all ]; then
    case "$name" in bert-base-cased|rte) ;; *) continue ;; esac
  elif [ "$what" != "$name" ]; then
    continue
  fi
  src="$url"
  if [ -n "$mirror" ]; then src="${mirror%/}/${url#*://}"; fi
  out="$dest/$rel"
  mkdir -p "$(dirname "$out")"
  # The expected hash: the manifest's, else the one recorded at an earlier download.
  if [ "$sha" = "-" ]; then sha=$(awk -v f="$rel" '$2 == f {print $1}' "$sums" | tail -n 1); fi
  if [ -f "$out" ] && [ -n "$sha" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$sha" ]; then
    echo "download: $rel already present (sha256 ok)"
    continue
  fi
  echo "download: $src -> $out"
  tmp="$out.partial.$$"
  if ! curl --fail --location --retry 3 "${progress[@]}" -o "$tmp" "$src"; then
    rm -f "$tmp"
    die "could not fetch $src (no network? use --mirror=URL_PREFIX for a local copy)"
  fi
  got=$(sha256sum "$tmp" | cut -d' ' -f1)
  if [ -n "$sha" ] && [ "$got" != "$sha" ]; then
    rm -f "$tmp"
    die "$rel: sha256 $got does not match the expected $sha; the file was not kept"
  fi
  mv -f "$tmp" "$out"
  if [ -z "$sha" ]; then
    echo "download: $rel sha256 $got (not pinned in the manifest; recorded in $sums)"
    printf '%s  %s\n' "$got" "$rel" >> "$sums"
    if [ "$pin" = 1 ]; then
      awk -F'\t' -v OFS='\t' -v u="$url" -v h="$got" '$2 == u {$4 = h} {print}' "$manifest" > "$manifest.tmp" && mv "$manifest.tmp" "$manifest"
    fi
  else
    echo "download: $rel sha256 ok"
  fi
  fetched=$((fetched + 1))
  if [ "${rel##*.}" = zip ]; then
    unzip -q -o "$out" -d "$dest" || die "$rel: cannot unpack"
    echo "download: unpacked $rel into $dest"
  elif [ "${rel%.tar.gz}" != "$rel" ]; then
    tar -xzf "$out" -C "$dest" || die "$rel: cannot unpack"
    echo "download: unpacked $rel into $dest"
  fi
done < "$manifest"
echo "download: done ($fetched file(s) fetched) in $dest"
