"""The course's stages for Bazel: one row each, and the lists of targets other BUILD files take
from them, so that a stage added is a folder and a row here (and its row in stages.h, which
//common/stages:stages_test holds to this file; docs/architecture.md, "Adding a stage").

Each row: the stage's id (what logs, messages, submissions and the grader call it), its folder
(the Bazel package), the files the student writes (in student/ and reference/), and whether it
runs on several ranks. Every folder has the same targets: :reference and :student (the stage's
binary on the reference solution or the student's files), :student_test (the student's local
test, tagged manual: it fails on the stubs) and :reference_student_test.

The student kit reads BUILD files without Bazel (tools/student_kit.cc): a statement that calls
one of the helpers below whose name starts with stage_reference is removed from the kit, as a
statement naming a reference target is; the others name only targets the kit keeps.
"""

def _row(id, package, files, distributed = True):
    return struct(id = id, package = package, files = files, distributed = distributed)

# In the order the course takes them (and the grader reports them).
STAGES = [
    _row("part1", "part1_single", ["train_step.cc"], distributed = False),
    _row("task2a", "task2a", ["grad_sync.cc"]),
    _row("task2b", "task2b", ["grad_sync.cc"]),
    _row("task3", "task3", ["bucketed_ddp.cc", "per_parameter_ddp.cc"]),
    _row("task5", "task5", ["sharded_step.cc"]),
]

def _rows(distributed):
    return [s for s in STAGES if distributed == None or s.distributed == distributed]

def stage_labels(target, distributed = None):
    """Every stage's `target` (student, student_test, ...), e.g. //task2a:student."""
    if target.startswith("reference"):
        fail("stage_labels('%s'): use stage_reference_labels (the kit removes what calls it)" % target)
    return ["//%s:%s" % (s.package, target) for s in _rows(distributed)]

def stage_student_files():
    """Every stage's student/ files, e.g. //task3:student/bucketed_ddp.cc."""
    return ["//%s:student/%s" % (s.package, f) for s in STAGES for f in s.files]

def stage_target_args(target, distributed = None):
    """--target=LABEL=$(rootpath LABEL) for every stage's `target` (the docs tests' form)."""
    return ["--target=%s=$(rootpath %s)" % (l, l) for l in stage_labels(target, distributed)]

def stage_reference_labels(target = "reference", distributed = None):
    """Every stage's reference binary (or another target of the reference side)."""
    return ["//%s:%s" % (s.package, target) for s in _rows(distributed)]

def stage_reference_files():
    """Every stage's reference/ files, e.g. //task2a:reference/grad_sync.cc."""
    return ["//%s:reference/%s" % (s.package, f) for s in STAGES for f in s.files]

def stages_tsv():
    """id, package, distributed (0/1) and the student's files, tab-separated, a line per stage."""
    return "".join(["\t".join([s.id, s.package, "1" if s.distributed else "0"] + s.files) + "\n" for s in STAGES])
