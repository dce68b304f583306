#!/usr/bin/env bash
# Checks the request RSpec that tools/cloudlab/profile.py makes, by running it with geni-lib
# outside the portal, where geni-lib binds the parameters from command-line flags
# (--nodeCount=2 ...) and prints the RSpec on standard output; one run also binds them the way
# the portal does (GENILIB_PORTAL_MODE, a JSON file of values, the RSpec written to a file).
# Nothing is run on CloudLab: this checks what the profile asks for, not what CloudLab makes.
#
#   bash tools/cloudlab/profile_test.sh
#
# geni-lib comes from PyPI into a virtual environment kept at
# ${DISTLM_CACHE:-~/.cache/distlm}/geni-lib-venv (reused by later runs). Without python3's venv
# module or without PyPI it says SKIPPED, loudly, and exits 0. Also checked: startup.sh parses
# (bash -n) and passes shellcheck where shellcheck is installed.
# Prints OK / NOT OK per check and "profile_test: N passed, M failed"; exits 1 on any NOT OK.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
profile=$here/profile.py
GENI_LIB_VERSION=0.9.9.4  # the newest on PyPI (2020); CloudLab's portal runs its own copy
# Bazel's tests run without HOME: the user's home from the password database then.
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
venv=${DISTLM_CACHE:-$home/.cache/distlm}/geni-lib-venv
work=$(mktemp -d "${TMPDIR:-/tmp}/profile_test.XXXXXX")
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
ok() { echo "OK: $*"; passed=$((passed + 1)); }
not_ok() { echo "NOT OK: $*"; failed=$((failed + 1)); }
skip() {
  echo "SKIPPED: tools/cloudlab/profile_test: $* -- the CloudLab profile was NOT checked"
  exit 0
}

# startup.sh first: it needs no geni-lib.
if bash -n "$here/startup.sh" 2>"$work/bash-n"; then ok "startup.sh parses (bash -n)"
else not_ok "startup.sh does not parse: $(cat "$work/bash-n")"; fi
if command -v shellcheck >/dev/null 2>&1; then
  if shellcheck "$here/startup.sh" "$here/profile_test.sh" >"$work/sc" 2>&1; then
    ok "shellcheck startup.sh profile_test.sh: clean"
  else not_ok "shellcheck startup.sh profile_test.sh:"; cat "$work/sc"; fi
else
  echo "SKIPPED: shellcheck is not installed; startup.sh was only parsed"
fi

# geni-lib, once.
py=$venv/bin/python
if ! "$py" -c "import geni.portal, geni.rspec.pg" >/dev/null 2>&1 ||
   [ "$("$py" -m pip show geni-lib 2>/dev/null | sed -n 's/^Version: //p')" != "$GENI_LIB_VERSION" ]; then
  python3 -m venv "$venv" >"$work/venv.log" 2>&1 ||
    skip "python3 -m venv failed (Debian: apt-get install python3-venv): $(tail -1 "$work/venv.log")"
  # six: geni-lib imports it without declaring it.
  if ! "$venv/bin/pip" install --disable-pip-version-check --retries 1 --timeout 30 \
       "geni-lib==$GENI_LIB_VERSION" six >"$work/pip.log" 2>&1; then
    tail -5 "$work/pip.log"
    skip "pip could not install geni-lib $GENI_LIB_VERSION from PyPI (no network?)"
  fi
fi
# PyPI's geni-lib is Python 2 in three places (print statements and raw_input in geni/portal.py,
# bytes written to a text stream in Request.writeXML); CloudLab's portal runs a Python 3 copy.
# They are mended in this private copy only, and each mend must find the text it expects.
if "$py" - >"$work/patch.log" 2>&1 <<'EOF'
import importlib.util, os, re, sys
root = os.path.dirname(importlib.util.find_spec("geni").origin)
def mend(rel, new, done):
    path = os.path.join(root, rel)
    text = open(path).read()
    if done(text):
        return
    fixed = new(text)
    if fixed == text or not done(fixed):
        sys.exit("%s: the expected Python 2 code is not there; geni-lib changed?" % path)
    open(path, "w").write(fixed)
    print("mended", path)
mend("portal.py",
     lambda t: re.sub(r"(?m)^(\s*)print (.+)$", r"\1print(\2)", t).replace("raw_input(", "input("),
     lambda t: not re.search(r"(?m)^\s*print [^(]", t) and "raw_input(" not in t)
mend("rspec/pg.py",
     lambda t: t.replace("    f.write(buf)\n",
                         "    f.write(buf.decode('utf-8') if isinstance(buf, bytes) else buf)\n"),
     lambda t: "    f.write(buf)\n" not in t)
import geni.portal, geni.rspec.pg  # noqa: E402,F401  (must now import)
EOF
then ok "geni-lib $GENI_LIB_VERSION in $venv imports under $("$py" -V 2>&1)"
else not_ok "geni-lib could not be mended to import:"; cat "$work/patch.log"
  echo "profile_test: $passed passed, $failed failed"; exit 1; fi

# check.py XML EXPECTATIONS...: prints OK / NOT OK lines for one generated RSpec.
cat >"$work/check.py" <<'EOF'
import shlex, subprocess, sys, xml.etree.ElementTree as ET
R = "{http://www.geni.net/resources/rspec/3}"
xml_path, label = sys.argv[1], sys.argv[2]
want = dict(a.split("=", 1) for a in sys.argv[3:])
n = int(want["nodes"])
bad = 0
def check(cond, what, found):
    global bad
    print("%s: [%s] %s%s" % ("OK" if cond else "NOT OK", label, what,
                             "" if cond else " (found: %s)" % (found,)))
    bad += 0 if cond else 1
root = ET.parse(xml_path).getroot()
check(root.tag == R + "rspec" and root.get("type") == "request", "a request RSpec",
      (root.tag, root.get("type")))
nodes = root.findall(R + "node")
names = [x.get("client_id") for x in nodes]
check(names == ["node%d" % i for i in range(n)], "%d nodes node0..node%d" % (n, n - 1), names)
images = {x.find(R + "sliver_type/" + R + "disk_image").get("name") for x in nodes}
check(images == {want["image"]}, "disk image " + want["image"], images)
hw = {(x.find(R + "hardware_type").get("name") if x.find(R + "hardware_type") is not None
       else "") for x in nodes}
check(hw == {want.get("hw", "")}, "hardware type '%s'" % want.get("hw", ""), hw)
links = root.findall(R + "link")
if n == 1:
    check(links == [] and root.find(".//" + R + "interface") is None,
          "one node: no LAN, no interface", [l.get("client_id") for l in links])
else:
    check(len(links) == 1 and links[0].get("client_id") == "lan"
          and links[0].find(R + "link_type").get("name") == "lan",
          "one LAN named 'lan'", [(l.get("client_id"), l.find(R + "link_type").get("name"))
                                  for l in links])
    refs = sorted(r.get("client_id") for l in links for r in l.findall(R + "interface_ref"))
    ifaces = sorted(i.get("client_id") for x in nodes for i in x.findall(R + "interface"))
    check(len(ifaces) == n and refs == ifaces, "the LAN holds all %d interfaces" % n,
          "refs %s, interfaces %s" % (refs, ifaces))
    ips = [[(ip.get("address"), ip.get("netmask")) for ip in x.iter(R + "ip")] for x in nodes]
    check(ips == [[("10.10.1.%d" % (i + 1), "255.255.255.0")] for i in range(n)],
          "addresses 10.10.1.1..10.10.1.%d, netmask 255.255.255.0" % n, ips)
execs = [x.findall(R + "services/" + R + "execute") for x in nodes]
check(all(len(e) == 1 and e[0].get("shell") == "bash" for e in execs),
      "one execute service (bash) per node", [[e.get("shell") for e in es] for es in execs])
cmds = {e.get("command") for es in execs for e in es}
check(len(cmds) == 1, "the same start-up command on every node", len(cmds))
cmd = cmds.pop()
words = shlex.split(cmd)
check(words[:3] == ["sudo", "bash", "-c"] and len(words) == 4, "the command is sudo bash -c '...'",
      words[:3])
inner = words[-1]
syntax = subprocess.run(["bash", "-n", "-c", inner], capture_output=True, text=True)
check(syntax.returncode == 0, "its script parses (bash -n)", syntax.stderr.strip())
log = "/local/logs/distlm-setup.log"
for part, what in [("git clone --branch %s %s /local/distlm" % (want["branch"], want["url"]),
                    "clones the branch and URL into /local/distlm"),
                   ("test -d /local/distlm/.git ||", "skips the clone when a checkout exists"),
                   ("bash /local/distlm/tools/cloudlab/startup.sh", "runs startup.sh"),
                   (">>%s 2>&1" % log, "appends its output to " + log),
                   ("chmod 644 %s" % log, "makes the log world-readable")]:
    check(part in inner, what, inner)
wheel = "DISTLM_TORCH_WHEEL=" in inner
check(wheel == (want.get("gpu") == "1"),
      "LibTorch from the torch wheel" if want.get("gpu") == "1" else "Debian's LibTorch (no wheel)",
      wheel)
sys.exit(1 if bad else 0)
EOF

# gen NAME FLAGS...: runs profile.py standalone; its RSpec in $work/NAME.xml, stderr in .err.
gen() {
  local name=$1
  shift
  (cd "$work" && "$py" "$profile" "$@" >"$work/$name.xml" 2>"$work/$name.err")
}
# expect_rspec NAME FLAGS... -- EXPECTATIONS...
expect_rspec() {
  local name=$1 flags=()
  shift
  while [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  if gen "$name" "${flags[@]}"; then
    ok "[$name] profile.py ${flags[*]}: exit 0"
    "$py" "$work/check.py" "$work/$name.xml" "$name" "$@" >"$work/$name.check"
    cat "$work/$name.check"
    passed=$((passed + $(grep -c '^OK' "$work/$name.check")))
    failed=$((failed + $(grep -c '^NOT OK' "$work/$name.check")))
  else
    not_ok "[$name] profile.py ${flags[*]}: exit $?: $(tail -3 "$work/$name.err")"
  fi
}
# expect_error NAME PARAMETER FLAGS...: the portal's parameter error, naming PARAMETER, no RSpec.
expect_error() {
  local name=$1 param=$2 status
  shift 2
  gen "$name" "$@"
  status=$?
  if [ "$status" -ge 100 ] && grep -q "\"$param\"" "$work/$name.err" && ! grep -q '<rspec' "$work/$name.xml"; then
    ok "[$name] profile.py $*: refused (exit $status): $(cat "$work/$name.err")"
  else
    not_ok "[$name] profile.py $*: expected a parameter error on $param, got exit $status, stderr: $(tail -3 "$work/$name.err")"
  fi
}

DEB12=urn:publicid:IDN+emulab.net+image+emulab-ops//DEB12-64-STD
UBU22=urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD
URL=https://github.com/your-course/distlm.git

expect_rspec default -- nodes=4 image=$DEB12 branch=main url=$URL
# geni-lib binds a boolean flag with Python's bool(): any non-empty value is true.
expect_rspec gpu --nodeCount=2 --useGpu=1 -- nodes=2 image=$UBU22 hw=d7525 gpu=1 branch=main url=$URL
expect_rspec one --nodeCount=1 --hardwareType=m510 --repoBranch=fall-2026 \
  --repoUrl=https://example.org/c/distlm.git -- \
  nodes=1 image=$DEB12 hw=m510 branch=fall-2026 url=https://example.org/c/distlm.git
expect_error zero nodeCount --nodeCount=0
expect_error seventeen nodeCount --nodeCount=17
expect_error url repoUrl "--repoUrl=https://x.org/a.git;reboot"
expect_error branch repoBranch "--repoBranch=-x"

# The portal's own way: values from a JSON file, the RSpec written where it says.
echo '{"nodeCount": 3, "useGpu": false, "repoBranch": "spring"}' >"$work/params.json"
if (cd "$work" && GENILIB_PORTAL_MODE=1 GENILIB_PORTAL_PARAMS_PATH="$work/params.json" \
    GENILIB_PORTAL_REQUEST_PATH="$work/portal.xml" "$py" "$profile" >"$work/portal.out" 2>&1); then
  ok "[portal] portal mode (GENILIB_PORTAL_MODE): exit 0"
  "$py" "$work/check.py" "$work/portal.xml" portal nodes=3 image=$DEB12 branch=spring url=$URL \
    >"$work/portal.check"
  cat "$work/portal.check"
  passed=$((passed + $(grep -c '^OK' "$work/portal.check")))
  failed=$((failed + $(grep -c '^NOT OK' "$work/portal.check")))
else
  not_ok "[portal] portal mode: $(tail -3 "$work/portal.out")"
fi

echo "profile_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
