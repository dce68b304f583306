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
        models = ["bert", "vit"],
        own_tests = [],
        part = "",
        writes = "",
        teaches = "",
        handout = ""):
    """One stage; stages.h says what each field means. The last four are for the docs' tables."""
    if pattern not in _PATTERNS:
        fail("stage %s: pattern '%s' is not one of %s" % (id, pattern, ", ".join(_PATTERNS.keys())))
    if model_parallel < 0 or (model_parallel > 0 and ranks < 2):
        fail("stage %s: model_parallel = %d needs a distributed row (ranks > 1)" % (id, model_parallel))
    for m in models:
        if m not in ["bert", "vit"]:
            fail("stage %s: model '%s' is not bert or vit" % (id, m))
    for t in own_tests:
        if t.points < 0:
            fail("stage %s: its own test '%s' is worth %d points" % (id, t.name, t.points))
        if not t.name.startswith(id + ": "):
            fail("stage %s: its own test '%s' does not start with '%s: '" % (id, t.name, id))
    if not (part and writes and teaches and handout):
        fail("stage %s: part, writes, teaches and handout are what the docs' tables show; give each" % id)
    for text in [id, what, part, writes, teaches, handout] + files + required_ops + forbidden_ops + [t.name for t in own_tests]:
        if "\"" in text or "'" in text or "$" in text or "\\" in text:
            fail("stage %s: '%s' holds a quote, a backslash or a $ (the C++ table is generated from it)" % (id, text))
    tests = [_test(id + ": losses and gradient norms match the single-node run", parity_points)]
    if comm_points > 0:
        tests.append(_test(id + ": uses " + _join_ops(required_ops), comm_points))
    tests += own_tests
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
        # Every test that carries points, in report order: parity, collectives, the stage's own.
        tests = tests,
        points = _sum([t.points for t in tests]),
        part = part,
        writes = writes,
        teaches = teaches,
        handout = handout,
    )

def _sum(values):
    total = 0
    for v in values:
        total += v
    return total

def _join_ops(ops):
    if len(ops) < 2:
        return "".join(ops)
    return ", ".join(ops[:-1]) + " and " + ops[-1]

def _test(name, points):
    """A test of the stage's own (beyond parity and collectives), as results.json names it."""
    return struct(name = name, points = points)

# In the order the course takes them (and the grader reports them). Points follow the work
# each part asks for (reference solutions: part 1 15 lines, 2a 34, 2b 16, 3 165, 5 54);
# docs/instructor.md has the table, with 25 more for the written report.
STAGES = [
    # Every task trains with part 1's step; without part1/ the grader builds them with its own.
    _row("part1", ["train_step.cc"], "Backward / OptimizerStep / EndOfEpoch",
         ranks = 1, parity_points = 10,
         part = "1", writes = "the backward pass, the optimizer step, the evaluation call",
         teaches = "one step of training (backward, clipping, AdamW, the schedule) in the loop every later stage reuses",
         handout = "part1.md"),
    _row("task2a", ["grad_sync.cc"], "SyncGradients (gather + scatter)",
         parity_points = 12, comm_points = 3, required_ops = ["gather", "scatter"],
         forbidden_ops = ["allreduce", "reduce", "allgather", "reduce_scatter"], grading = True,
         pattern = "gather_scatter",
         part = "2a", writes = "gradient averaging through rank 0 (gather + scatter)",
         teaches = "why averaged gradients give the update of one machine, and the cost of one rank in the middle",
         handout = "part2.md#task-2a"),
    _row("task2b", ["grad_sync.cc"], "SyncGradients (all_reduce)",
         parity_points = 8, comm_points = 2, required_ops = ["allreduce"], takes_comm_dtype = True,
         pattern = "ring_allreduce",
         part = "2b", writes = "gradient averaging with all_reduce",
         teaches = "the ring all-reduce, its bytes per rank and its round trips",
         handout = "part2.md#task-2b"),
    # The student's own DDP: parity on the bucketed version (3b) at a cap that makes several
    # buckets on the tiny model, and its own tests (task3/grading/ddp_checks.h).
    _row("task3", ["bucketed_ddp.cc", "per_parameter_ddp.cc"],
         "your DistributedDataParallel (per-parameter, buckets, no_sync)",
         parity_points = 12, grading = True, takes_comm_dtype = True, pattern = "ring_allreduce",
         # The bucket layout and 3a's one all-reduce per parameter are read from files the
         # student's process writes: told, for feedback, at no points (grading/README.md).
         own_tests = [
             _test("task3: buckets in reverse order, closed at the cap (3b)", 0),
             _test("task3: bucket all-reduces start while backward runs (3b)", 10),
             _test("task3: per-parameter DDP matches the single-node run (3a)", 8),
             _test("task3: per-parameter DDP sends one all-reduce per parameter during backward (3a)", 0),
             _test("task3: no_sync: gradient accumulation sends each gradient once per update (3c)", 8),
             _test("task3: a parameter without a gradient is named in an error", 2),
         ],
         part = "3",
         writes = "your own DistributedDataParallel: one all-reduce per parameter from autograd hooks (3a), gradient buckets (3b), no_sync (3c)",
         teaches = "overlapping communication with backward, and measuring how much of it hides",
         handout = "part3.md"),
    # The advanced part: graded when submitted. Over Gloo (LibTorch 1.13 has no reduce_scatter
    # there) the reduce-scatter is an all_reduce plus a slice, so only the all-gather is a
    # collective of its own.
    _row("task5", ["sharded_step.cc"], "ShardedStep (reduce-scatter, shard step, all-gather)",
         parity_points = 16, comm_points = 4, required_ops = ["allgather"], optional = True,
         grading = True, pattern = "allreduce_allgather",
         part = "5 (advanced)", writes = "sharded data parallelism, ZeRO stage 2: reduce-scatter, shard step, all-gather",
         teaches = "each rank keeps and updates only its slice of the optimizer state: memory for traffic",
         handout = "part5.md"),
    # Fully sharded data parallel (ZeRO-3): each unit gathered for its forward and backward,
    # freed after each, its gradient reduce-scattered. Advanced, graded when submitted; its
    # all-gathers are the collectives of its own (the reduce-scatter is an all_reduce plus a
    # slice over Gloo, as task 5's).
    _row("task6", ["fsdp.cc"], "GatherUnit / ReshardUnit / ReduceScatterGrad / ShardedStep (fully sharded)",
         parity_points = 16, comm_points = 4, required_ops = ["allgather"], optional = True,
         grading = True, pattern = "allreduce_two_allgathers",
         # Prefetch and the reduce-scatter's overlap are read from the log the student's process
         # writes: told, for feedback, at no points (grading/README.md).
         own_tests = [
             _test("task6: prefetched all-gathers travel while a unit computes (6b)", 0),
             _test("task6: reduce-scatters run behind the rest of backward (6c)", 0),
         ],
         part = "6 (advanced)",
         writes = "fully sharded data parallelism (ZeRO stage 3, FSDP): gather, reshard, reduce-scatter per unit, the sharded step",
         teaches = "nothing is held whole longer than it computes; prefetch (6b) and the reduce-scatter behind backward (6c)",
         handout = "part6.md"),
    # Tensor parallelism (7a, Megatron-LM's layout): the model split over 2 ranks that share one
    # replica, so each reads the whole batch (model_parallel = 2: the tiny BERT's and the tiny
    # ViT's 2 heads allow no more). Advanced, graded when submitted. Its all-reduces carry
    # activations, not gradients: no traffic pattern of task 4's. 7c (a 2 x 2 data x tensor
    # layout) and 7b (pipelines of 2 stages under both schedules) are task 7's own tests.
    _row("task7", ["tensor_parallel.cc", "device_mesh.cc", "pipeline_schedule.cc", "pipeline_parallel.cc"],
         "f, g, ColumnParallelLinear and RowParallelLinear (tensor parallel)",
         parity_points = 12, optional = True, grading = True, model_parallel = 2, models = ["bert", "vit"],
         own_tests = [
             _test("task7: 7c, 2 x 2 (data x tensor) on 4 ranks: losses and gradient norms match the single-node run", 6),
             _test("task7: 7b, pipelines of 2 stages (1F1B over 4 micro-batches, all forward all backward over 2): " +
                   "losses and gradient norms match the single-node run, and 1F1B holds 2 micro-batches on stage 0", 8),
         ],
         part = "7 (advanced)",
         writes = "model parallelism: tensor-parallel linears with f and g (7a), pipeline schedules and their send/recv loop (7b), the process-group layout of 2D parallelism (7c)",
         teaches = "tensor parallelism in the layout of Megatron-LM, the bubble of a pipeline and the activations each schedule keeps, 2D layouts through process subgroups",
         handout = "part7.md"),
    # Local SGD and DiLoCo (8a), their exchange in int8 with error feedback (8b), workers that
    # leave and join (8c). Each worker trains alone on its shard until the round ends, so parity
    # is one round of 5 updates at outer lr 1 without momentum: rank 0's trace is part 1's on its
    # shard, and every rank ends with the mean of the shards' models (StageGrading::
    # TrainsOnShardsAlone). DiLoCo's momentum, int8 and 8c's leave and join are its own tests,
    # against the grader's own run of each. Advanced, graded when submitted.
    _row("task8", ["outer_loop.cc", "int8_exchange.cc"], "OuterLoop (local SGD and DiLoCo rounds) and the int8 exchange",
         parity_points = 10, optional = True, grading = True,
         own_tests = [
             _test("task8: DiLoCo rounds (outer Nesterov momentum, rounds of 2) match the grader run (8a)", 5),
             _test("task8: int8 rounds with error feedback match the grader run and send its bytes (8b)", 5),
             _test("task8: a worker lost mid-round and a joiner in its place end as the grader run (8c)", 5),
         ],
         part = "8 (advanced)",
         writes = "local SGD and DiLoCo (8a), int8 with error feedback (8b), workers that join (8c)",
         teaches = "training across slow links: meeting every H updates instead of every update, and compression that keeps what it cannot say",
         handout = "part8.md"),
]

# Part 4 is measurements, not a stage: no student files and no points. The docs' tables show it
# after task 3.
MEASUREMENTS = struct(
    id = "task4_bench",
    after = "task3",
    part = "4 (optional)",
    writes = "measurements: collectives, traffic, scaling, memory",
    teaches = "collectives, the bytes an update really sends, an emulated cluster with shaped links, scaling",
    handout = "part4.md",
)

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

def _model_total(model, optional):
    total = 0
    for s in STAGES:
        if model in s.models and (optional or not s.optional):
            total += s.points
    return total

def _block(out, name, lines):
    out.append("<!-- stages.bzl: %s -->" % name)
    out.extend(lines)
    out.append("<!-- end %s -->" % name)

def _course():
    """The stages and part 4's measurements, in the order the course takes them."""
    rows = []
    for s in STAGES:
        rows.append(s)
        if s.id == MEASUREMENTS.after:
            rows.append(MEASUREMENTS)
    return rows

def stages_docs():
    """The docs' blocks made from the table, each between '<!-- stages.bzl: NAME -->' and
    '<!-- end NAME -->' lines; //docs:stage_facts_test holds the docs to them and
    `bazel run //docs:stage_facts -- --update` writes them in."""
    out = []
    lines = ["| part | folder | you write | it teaches |", "| --- | --- | --- | --- |"]
    for s in _course():
        lines.append("| %s | `%s/` | %s | %s |" % (s.part, s.id, s.writes, s.teaches))
    _block(out, "stage_table", lines)

    lines = ["| part | you write | points | read |", "| --- | --- | --- | --- |"]
    for s in _course():
        points = str(s.points) if hasattr(s, "points") else "not graded"
        lines.append("| %s | %s | %s | [%s](%s) |" % (s.part, s.writes, points, s.handout.split("#")[0], s.handout))
    _block(out, "handout_table", lines)

    lines = ["| test | points |", "| --- | --- |"]
    for s in STAGES:
        for t in s.tests:
            lines.append("| %s | %d |" % (t.name, t.points))
    _block(out, "points_table", lines)

    lines = ["```text"]
    for s in STAGES:
        for i, f in enumerate(s.files):
            line = "%s/%s" % (s.id, f)
            if s.optional and i == 0:
                line = (line + " " * 33)[:33] + "optional (part %s)" % s.part.split(" ")[0]
                if len(s.files) > 1:
                    line += ": all %d files together" % len(s.files)
            lines.append(line)
    _block(out, "submission_layout", lines + ["```"])

    optional = [s for s in STAGES if s.optional]
    bert, vit = _model_total("bert", True), _model_total("vit", True)
    worth = "%d points, graded on BERT or on the ViT" % bert if bert == vit else "%d points on BERT and %d on the ViT" % (bert, vit)
    _block(out, "totals", [
        "A submission of every part is worth %s: %d for the required parts (%s) and %s for the advanced parts %s, each graded when its folder is submitted." % (
            worth,
            _model_total("bert", False),
            ", ".join([s.part for s in STAGES if not s.optional]),
            ", ".join([str(s.points) for s in optional]),
            ", ".join([s.part.split(" ")[0] for s in optional]),
        ),
    ])
    return "\n".join(out) + "\n"

def stages_json():
    """The table for scripts outside Bazel (grading/gradescope/e2e_debootstrap.sh), as JSON."""
    stages = []
    for s in STAGES:
        stages.append("{\"id\": \"%s\", \"files\": [%s], \"points\": %d, \"parity_points\": %d, \"optional\": %s, \"models\": [%s]}" % (
            s.id,
            ", ".join(["\"%s\"" % f for f in s.files]),
            s.points,
            s.parity_points,
            _bool(s.optional),
            ", ".join(["\"%s\"" % m for m in s.models]),
        ))
    totals = ", ".join(["\"%s\": %d" % (m, _model_total(m, True)) for m in ["bert", "vit"]])
    return "{\"stages\": [%s], \"total\": {%s}, \"required\": %d}\n" % (
        ", ".join(stages),
        totals,
        _model_total("bert", False),
    )

def stages_cc_rows():
    """The C++ rows of stages.h's table: //common/stages:stages_table writes them to stages_table.inc."""
    rows = []
    for s in STAGES:
        grading = "{%d, %s, %s, %s, %s, %d, {%s}, %s}" % (
            s.ranks,
            _strings(s.required_ops),
            _strings(s.forbidden_ops),
            _bool(s.optional),
            _bool(s.grading),
            s.model_parallel,
            ", ".join(["{\"%s\", %d}" % (t.name, t.points) for t in s.tests]),
            _bool(s.comm_points > 0),
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

def distlm_stage(api, stage, impl_deps = [], main_deps = [], test_deps = [], test_size = "medium", test_timeout = None,
                 test_srcs = ["student_test.cc"]):
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
      test_srcs: the local test's files.
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
            srcs = test_srcs,
            tags = ["manual"] if side == "student" else [],
            deps = [api, ":%s_impl" % side] + test_deps,
        )
