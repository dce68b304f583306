"""The course's stages, once: one row each. Bazel's lists of stage targets come from here, and
so does the C++ table (common/stages/stages.h includes the rows generated from STAGES), so a
stage added is a folder and a row here (docs/architecture.md, "Adding a stage").

Each row: the stage's id (its folder, the Bazel package, and what logs, messages, submissions
and the grader call it), the files the student writes (in student/ and reference/), what they
write (for messages), how the grader runs and scores it, and how task 4's report counts its
traffic. Every folder's BUILD calls distlm_stage() below, which makes the same targets in each.

The student kit reads BUILD files without Bazel (tools/student_kit.cc): a statement that calls
one of the helpers below whose name starts with stage_reference is removed from the kit, as a
statement naming a reference target is; the others name only targets the kit keeps. It knows
distlm_stage's targets by name (tools/build_file.h, kStageMacro): keep the two lists alike.
"""

_PATTERNS = {
    "none": "kNone",
    "ring_allreduce": "kRingAllreduce",
    "gather_scatter": "kGatherScatter",
    "reduce_scatter_allgather": "kReduceScatterAllGather",
    "allreduce_allgather": "kAllreduceAllGather",
    "allreduce_two_allgathers": "kAllreduceTwoAllGathers",
}

def _row(
        id,
        files,
        what,
        parity_points,
        ranks = 4,
        comm_points = 0,
        required_ops = [],
        forbidden_ops = [],
        optional = False,
        grading = False,
        takes_comm_dtype = False,
        pattern = "none",
        model_parallel = 0,
        models = ["bert", "vit"]):
    """One stage; stages.h says what each field means."""
    if pattern not in _PATTERNS:
        fail("stage %s: pattern '%s' is not one of %s" % (id, pattern, ", ".join(_PATTERNS.keys())))
    if model_parallel < 0 or (model_parallel > 0 and ranks < 2):
        fail("stage %s: model_parallel = %d needs a distributed row (ranks > 1)" % (id, model_parallel))
    for m in models:
        if m not in ["bert", "vit"]:
            fail("stage %s: model '%s' is not bert or vit" % (id, m))
    for text in [id, what] + files + required_ops + forbidden_ops:
        if "\"" in text or "'" in text or "$" in text or "\\" in text:
            fail("stage %s: '%s' holds a quote, a backslash or a $ (the C++ table is generated from it)" % (id, text))
    return struct(
        id = id,
        files = files,
        what = what,
        distributed = ranks > 1,
        ranks = ranks,
        parity_points = parity_points,
        comm_points = comm_points,
        required_ops = required_ops,
        forbidden_ops = forbidden_ops,
        optional = optional,
        grading = grading,
        takes_comm_dtype = takes_comm_dtype,
        pattern = pattern,
        model_parallel = model_parallel,
        models = models,
    )

# In the order the course takes them (and the grader reports them). Points follow the work
# each part asks for (reference solutions: part 1 15 lines, 2a 34, 2b 16, 3 165, 5 54);
# docs/instructor.md has the table, with 25 more for the written report.
STAGES = [
    # Every task trains with part 1's step; without part1/ the grader builds them with its own.
    _row("part1", ["train_step.cc"], "Backward / OptimizerStep / EndOfEpoch",
         ranks = 1, parity_points = 10),
    _row("task2a", ["grad_sync.cc"], "SyncGradients (gather + scatter)",
         parity_points = 12, comm_points = 3, required_ops = ["gather", "scatter"],
         forbidden_ops = ["allreduce", "reduce", "allgather", "reduce_scatter"], grading = True,
         pattern = "gather_scatter"),
    _row("task2b", ["grad_sync.cc"], "SyncGradients (all_reduce)",
         parity_points = 8, comm_points = 2, required_ops = ["allreduce"], takes_comm_dtype = True,
         pattern = "ring_allreduce"),
    # The student's own DDP: parity on the bucketed version (3b) at a cap that makes several
    # buckets on the tiny model; task3/grading/ddp_checks.h adds 28 points of its own tests.
    _row("task3", ["bucketed_ddp.cc", "per_parameter_ddp.cc"],
         "your DistributedDataParallel (per-parameter, buckets, no_sync)",
         parity_points = 12, grading = True, takes_comm_dtype = True, pattern = "ring_allreduce"),
    # The advanced part: graded when submitted. Over Gloo (LibTorch 1.13 has no reduce_scatter
    # there) the reduce-scatter is an all_reduce plus a slice, so only the all-gather is a
    # collective of its own.
    _row("task5", ["sharded_step.cc"], "ShardedStep (reduce-scatter, shard step, all-gather)",
         parity_points = 16, comm_points = 4, required_ops = ["allgather"], optional = True,
         grading = True, pattern = "allreduce_allgather"),
    # Fully sharded data parallel (ZeRO-3): each unit gathered for its forward and backward,
    # freed after each, its gradient reduce-scattered. Advanced, graded when submitted; its
    # all-gathers are the collectives of its own (the reduce-scatter is an all_reduce plus a
    # slice over Gloo, as task 5's). task6/grading adds 4 points: prefetch (6b) and the
    # reduce-scatter behind backward (6c).
    _row("task6", ["fsdp.cc"], "GatherUnit / ReshardUnit / ReduceScatterGrad / ShardedStep (fully sharded)",
         parity_points = 12, comm_points = 4, required_ops = ["allgather"], optional = True,
         grading = True, pattern = "allreduce_two_allgathers"),
    # Tensor parallelism (7a, Megatron-LM's layout): the model split over 2 ranks that share one
    # replica, so each reads the whole batch (model_parallel = 2: the tiny BERT's and the tiny
    # ViT's 2 heads allow no more). Advanced, graded when submitted. Its all-reduces carry activations, not
    # gradients: no traffic pattern of task 4's (docs/handout/part7.md has its bytes per
    # update); the ViT's split as BERT's (its heads and MLP). task7/grading names its mistakes.
    # 7c's layout and data-group average (device_mesh.cc) are graded by task 7's own test of a
    # 2 x 2 (data x tensor) run on 4 ranks, 7b's schedules and loop (pipeline_schedule.cc,
    # pipeline_parallel.cc) by its test of 2-stage pipelines under both schedules.
    _row("task7", ["tensor_parallel.cc", "device_mesh.cc", "pipeline_schedule.cc", "pipeline_parallel.cc"],
         "f, g, ColumnParallelLinear and RowParallelLinear (tensor parallel)",
         parity_points = 12, optional = True, grading = True, model_parallel = 2, models = ["bert", "vit"]),
]

def _rows(distributed):
    return [s for s in STAGES if distributed == None or s.distributed == distributed]

def _labels(target, distributed):
    return ["//%s:%s" % (s.id, target) for s in _rows(distributed)]

def stage_labels(target, distributed = None):
    """Every stage's `target` (student, student_test, ...), e.g. //task2a:student."""
    if target.startswith("reference"):
        fail("stage_labels('%s'): use stage_reference_labels (the kit removes what calls it)" % target)
    return _labels(target, distributed)

def stage_student_files():
    """Every stage's student/ files, e.g. //task3:student/bucketed_ddp.cc."""
    return ["//%s:student/%s" % (s.id, f) for s in STAGES for f in s.files]

def stage_target_args(target, distributed = None):
    """--target=LABEL=$(rootpath LABEL) for every stage's `target` (the docs tests' form)."""
    return ["--target=%s=$(rootpath %s)" % (l, l) for l in stage_labels(target, distributed)]

def stage_reference_labels(target = "reference", distributed = None):
    """Every stage's reference binary (or another target of the reference side)."""
    return _labels(target, distributed)

def stage_reference_gradings():
    """The grading libraries of the stages that have one (<folder>/grading: what the grader
    knows of the stage beyond its row; grading/stage_grading.h). Private, as the references."""
    return ["//%s/grading" % s.id for s in STAGES if s.grading]

def stage_reference_grading_data():
    """What those gradings run (each package's :grader_data: its own mutants), for the grader's
    runfiles."""
    return ["//%s/grading:grader_data" % s.id for s in STAGES if s.grading]

def stage_reference_mutation_suites():
    """The stages' grading suites (<folder>/grading:mutation_suite: their mutants graded, in
    process), linked into //grading:autograder_test, which runs them with one grader."""
    return ["//%s/grading:mutation_suite" % s.id for s in STAGES if s.grading]

def stage_reference_files():
    """Every stage's reference/ files, e.g. //task2a:reference/grad_sync.cc."""
    return ["//%s:reference/%s" % (s.id, f) for s in STAGES for f in s.files]

def _strings(items):
    return "{" + ", ".join(["\"%s\"" % i for i in items]) + "}"

def _bool(b):
    return "true" if b else "false"

def stages_cc_rows():
    """The C++ rows of stages.h's table: //common/stages:stages_table writes them to stages_table.inc."""
    rows = []
    for s in STAGES:
        grading = "{%d, %d, %d, %s, %s, %s, %s, %d}" % (
            s.ranks,
            s.parity_points,
            s.comm_points,
            _strings(s.required_ops),
            _strings(s.forbidden_ops),
            _bool(s.optional),
            _bool(s.grading),
            s.model_parallel,
        )
        rows.append("{\"%s\", %s, \"%s\", %s, %s, {SyncPattern::%s}, %s},\n" % (
            s.id,
            _strings(s.files),
            s.what,
            _bool(s.takes_comm_dtype),
            grading,
            _PATTERNS[s.pattern],
            _strings(s.models),
        ))
    return "".join(rows)

def _row_of_package():
    pkg = native.package_name()
    for s in STAGES:
        if s.id == pkg:
            return s
    fail("distlm_stage() in //%s: no row of STAGES in //common/stages:stages.bzl has the id '%s' " % (pkg, pkg) +
         "(a stage's folder is its id)")

def distlm_stage(api, stage, impl_deps = [], main_deps = [], test_deps = [], test_size = "medium", test_timeout = None):
    """A stage's targets, made from its row: every stage folder has the same ones.

    :student_impl and :reference_impl  the row's files under student/ and reference/
    :student and :reference            the stage's binary (main.cc) on either; every stage
                                       after the first trains with part 1's step of the same side
    :student_test                      the student's local test (student_test.cc), tagged manual:
                                       it fails on the stubs by design (//tools:stubs_fail_their_tests_test
                                       checks that it does, with the stub's message)
    :reference_student_test            the same test on the reference, run by `bazel test //...`

    In the student kit there is no reference/ folder, and only the student's side is made.

    Args:
      api: the contract header's library (the functions the student writes).
      stage: the library of the stage's runtime class (what main.cc runs).
      impl_deps: what the student's and the reference's files use besides api and //common/runtime.
      main_deps: what main.cc uses besides the stage, api and the implementations.
      test_deps: what student_test.cc uses besides api and the implementation.
      test_size, test_timeout: of both tests (None: Bazel's default for the size).
    """
    row = _row_of_package()
    base = STAGES[0]
    sides = ["student"]
    if native.glob(["reference/*"]):
        sides.append("reference")
    for side in sides:
        present = native.glob([side + "/*"])
        for f in row.files:
            if side + "/" + f not in present:
                fail("stage %s: its row names %s, but %s/%s/%s does not exist" % (row.id, f, row.id, side, f))
        native.cc_library(
            name = side + "_impl",
            srcs = [side + "/" + f for f in row.files],
            deps = [api, "//common/runtime"] + impl_deps,
        )
        steps = []
        if row.id != base.id:
            steps = ["//%s:%s_impl" % (base.id, side), "//%s:train_step_header" % base.id]
        native.cc_binary(
            name = side,
            srcs = ["main.cc"],
            # The stage's library first: a static link takes what a library needs only from those
            # after it, and task 3's stage calls the student's constructors.
            deps = [stage] + steps + [api, ":%s_impl" % side] + main_deps,
        )
        native.cc_test(
            name = "student_test" if side == "student" else "reference_student_test",
            size = test_size,
            timeout = test_timeout,
            srcs = ["student_test.cc"],
            tags = ["manual"] if side == "student" else [],
            deps = [api, ":%s_impl" % side] + test_deps,
        )
