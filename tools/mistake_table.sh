#!/usr/bin/env bash
# The instructor guide's table of mistakes and what the students' local tests say about each:
# the mistakes tests make every mistake on purpose and run the local test on it, printing one
# "MISTAKE part | mistake | test | message" line each (grading/mistake_line.h). This runs them and
# prints the table; with --update it also writes it into docs/instructor.md, between
# "<!-- tools/mistake_table.sh -->" and "<!-- /mistake_table -->".
#
#   tools/mistake_table.sh [--update]
set -euo pipefail
cd "$(dirname "$0")/.."
update=false
case "${1:-}" in
  --update) update=true ;;
  "") ;;
  *) echo "usage: tools/mistake_table.sh [--update]" >&2; exit 2 ;;
esac
tests=(//grading:local_messages_test //task3/grading:ddp_mistakes_test //task5/grading:zero_mistakes_test
       //task6/grading:fsdp_mistakes_test //task7/grading:tp_mistakes_test
       //task7/grading:pipeline_mistakes_test)
bazel test "${tests[@]}" >&2
table=$(mktemp)
trap 'rm -f "$table"' EXIT
for t in "${tests[@]}"; do
  pkg=${t#//}; pkg=${pkg%%:*}; name=${t##*:}
  log="bazel-testlogs/$pkg/$name/test.log"
  [ -f "$log" ] || { echo "tools/mistake_table.sh: no log for $t at $log" >&2; exit 1; }
  grep '^MISTAKE ' "$log" || true
done | python3 -c '
import re, sys
print("| part | mistake | local test | what the student reads |")
print("| --- | --- | --- | --- |")
for line in sys.stdin:
    part, mistake, test, message = (f.strip() for f in line[len("MISTAKE "):].split(" | ", 3))
    if not message:
        continue  # a control: the solution itself, which passes
    # "rank 0: X rank 1: X": said once when every rank says the same.
    said = [m.strip() for m in re.split(r"\s*rank \d+: ", message) if m.strip()]
    text = said[0] if len(set(said)) == 1 else " / ".join(
        "rank %d: %s" % (r, m) for r, m in enumerate(said))
    print("| %s | %s | `%s` | %s |" % (part, mistake.replace("_", " "), test, text.replace("|", "\\|")))
' >"$table"
cat "$table"
if $update; then
  python3 - "$table" docs/instructor.md <<'PY'
import sys
table, doc = open(sys.argv[1]).read(), sys.argv[2]
text = open(doc).read()
start, end = "<!-- tools/mistake_table.sh -->\n", "<!-- /mistake_table -->"
a, b = text.find(start), text.find(end)
if a < 0 or b < a:
    sys.exit(f"tools/mistake_table.sh: {doc} has no block between '{start.strip()}' and '{end}'")
open(doc, "w").write(text[: a + len(start)] + table + text[b:])
print(f"tools/mistake_table.sh: wrote the table into {doc}", file=sys.stderr)
PY
fi
