#!/usr/bin/env bash
# tools/download against a local file:// mirror: checksums verified, bad files refused and not
# kept, present files skipped, zips unpacked.
set -euo pipefail
tool="$TEST_SRCDIR/distlm/tools/download/download.sh"
work="$TEST_TMPDIR/dl"
rm -rf "$work"; mkdir -p "$work/mirror/example.org/models" "$work/mirror/example.org/glue"
fail() { echo "FAIL: $*" >&2; exit 1; }

echo '{"hidden_size": 8}' > "$work/mirror/example.org/models/config.json"
mkdir -p "$work/zipsrc/RTE" && printf 'index\tsentence1\tsentence2\tlabel\n' > "$work/zipsrc/RTE/train.tsv"
(cd "$work/zipsrc" && zip -q -r "$work/mirror/example.org/glue/RTE.zip" RTE)
good=$(sha256sum "$work/mirror/example.org/models/config.json" | cut -d' ' -f1)
zsha=$(sha256sum "$work/mirror/example.org/glue/RTE.zip" | cut -d' ' -f1)
printf 'bert-base-cased\thttps://example.org/models/config.json\tbert/config.json\t%s\n' "$good" > "$work/manifest.tsv"
printf 'rte\thttps://example.org/glue/RTE.zip\tRTE.zip\t%s\n' "$zsha" >> "$work/manifest.tsv"

out=$("$tool" --dest="$work/dest" --mirror="file://$work/mirror" --manifest="$work/manifest.tsv" 2>&1) || fail "download failed: $out"
cmp "$work/dest/bert/config.json" "$work/mirror/example.org/models/config.json" || fail "content differs"
[ -f "$work/dest/RTE/train.tsv" ] || fail "RTE.zip not unpacked"
echo "$out" | grep -q "bert/config.json sha256 ok" || fail "no checksum message: $out"

out=$("$tool" --dest="$work/dest" --mirror="file://$work/mirror" --manifest="$work/manifest.tsv" 2>&1) || fail "second run failed"
echo "$out" | grep -q "bert/config.json already present (sha256 ok)" || fail "present file not skipped: $out"

# A corrupted mirror file is refused and leaves nothing behind.
echo tampered > "$work/mirror/example.org/models/config.json"
rm -f "$work/dest/bert/config.json"
if out=$("$tool" --dest="$work/dest" --mirror="file://$work/mirror" --manifest="$work/manifest.tsv" --what=bert-base-cased 2>&1); then
  fail "a bad checksum was accepted"
fi
echo "$out" | grep -q "bert/config.json: sha256 .* does not match the expected $good; the file was not kept" || fail "unclear message: $out"
[ ! -e "$work/dest/bert/config.json" ] || fail "bad file kept"
ls "$work/dest/bert" | grep -q partial && fail "partial file left"

# Unpinned files: the hash is recorded and enforced next time.
printf 'bert-base-cased\thttps://example.org/models/config.json\tbert/config.json\t-\n' > "$work/manifest2.tsv"
out=$("$tool" --dest="$work/dest2" --mirror="file://$work/mirror" --manifest="$work/manifest2.tsv" 2>&1) || fail "unpinned failed: $out"
echo "$out" | grep -q "not pinned" || fail "no unpinned notice: $out"
grep -q "bert/config.json" "$work/dest2/SHA256SUMS" || fail "hash not recorded"

# No network and no mirror: a clear error.
if out=$("$tool" --dest="$work/dest3" --mirror="file://$work/nothing" --manifest="$work/manifest.tsv" 2>&1); then fail "missing source accepted"; fi
echo "$out" | grep -q "could not fetch" || fail "unclear message: $out"
out=$("$tool" --what=nope --dest=x 2>&1) && fail "bad --what accepted"
echo "$out" | grep -q "must be all, bert-base-cased, rte, cifar10 or vit-base-patch16-224, got .nope." || fail "unclear message: $out"

# A tar.gz (CIFAR-10's release) is unpacked into --dest; --what=all leaves it out.
mkdir -p "$work/tarsrc/cifar-10-batches-bin" "$work/mirror/example.org/cifar"
printf 'x' > "$work/tarsrc/cifar-10-batches-bin/test_batch.bin"
tar -czf "$work/mirror/example.org/cifar/cifar-10-binary.tar.gz" -C "$work/tarsrc" cifar-10-batches-bin
tsha=$(sha256sum "$work/mirror/example.org/cifar/cifar-10-binary.tar.gz" | cut -d' ' -f1)
printf 'cifar10\thttps://example.org/cifar/cifar-10-binary.tar.gz\tcifar-10-binary.tar.gz\t%s\n' "$tsha" > "$work/manifest3.tsv"
out=$("$tool" --dest="$work/dest3" --mirror="file://$work/mirror" --manifest="$work/manifest3.tsv" 2>&1) || fail "all failed: $out"
[ ! -e "$work/dest3/cifar-10-binary.tar.gz" ] || fail "--what=all fetched CIFAR-10: $out"
out=$("$tool" --dest="$work/dest3" --mirror="file://$work/mirror" --manifest="$work/manifest3.tsv" --what=cifar10 2>&1) || fail "cifar10 failed: $out"
[ -f "$work/dest3/cifar-10-batches-bin/test_batch.bin" ] || fail "the tar.gz was not unpacked: $out"
echo "download_test: 7 checks passed"
