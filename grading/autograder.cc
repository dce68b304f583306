#include "grading/autograder.h"

#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "common/runtime/runfiles.h"
#include "grading/diagnosis.h"
#include "grading/final_weights.h"
#include "grading/kit_build.h"
#include "grading/run_failure.h"
#include "grading/sandbox.h"
#include "grading/stage_grading.h"
#include "grading/student_space.h"
#include "grading/submission.h"
#include "grading/text.h"
#include "grading/traffic_check.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxTestOutput = 6000;

// Launcher and MPI variables the grader may have inherited; a run starts clean of them.
const std::vector<std::string> kDistEnv = {"RANK",        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                           "GROUP_RANK",  "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID",
                                           "SLURM_NTASKS"};
// A binary built in the kit finds its data beside itself, not among the grader's runfiles.
const std::vector<std::string> kRunfilesEnv = {"RUNFILES_DIR", "RUNFILES_MANIFEST_FILE", "TEST_SRCDIR",
                                               "JAVA_RUNFILES"};

std::string Cap(std::string s) {
  return CapText(Printable(s), kMaxTestOutput, "\n[... cut ...]\n");
}

std::string JoinOps(const std::vector<std::string>& ops, const std::string& last_sep) {
  std::string s;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i > 0) s += i + 1 == ops.size() ? last_sep : ", ";
    s += ops[i];
  }
  return s;
}

// A seed from the kernel's random source, in [1, 2^31): no submission can know it in advance.
uint64_t DrawSeed() {
  uint32_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof(v), 0) != static_cast<ssize_t>(sizeof(v))) {
      throw GraderError(std::string("cannot draw this grading's seed: getrandom: ") + strerror(errno));
    }
    v &= 0x7FFFFFFFu;
  }
  return v;
}

}  // namespace

struct Autograder::Impl {
  GraderConfig config;
  bool have_expected = false;
  Trace expected;
  double gradient_bytes = 0;  // of the model the grader's own run saved (0: unknown, traffic not checked)
  std::string grader_model;   // that model.safetensors, bytes ("": final weights not checked)
  bool mistakes_tried = false;
  std::vector<KnownMistake> mistakes;
  // Each stage's own known mistakes (StageGrading::OwnMistakes), run only when one of its traces
  // fails, by stage id.
  std::map<std::string, bool> own_mistakes_tried;
  std::map<std::string, std::vector<KnownMistake>> own_mistakes;
  std::string mistakes_note;
  std::unique_ptr<StudentSpace> space;  // this grading's folders and jails

  void Progress(const std::string& line) const {
    if (config.progress) config.progress(line);
  }

  // The grader's own launcher (tools/launch), where student runs can execute it: in a jail the
  // grader's runfiles are covered, so a copy, root's and read-only, in work/shared. Not the
  // kit's: that one was built in, and lies in, the student's folder, where any earlier run could
  // have replaced it.
  std::string graded_launcher;
  const std::string& GradedLauncher() {
    if (!graded_launcher.empty()) return graded_launcher;
    const std::string own = RequiredGraderBinary("", "tools/launch", "launcher");
    if (!space->confined()) return graded_launcher = own;
    const std::string dir = space->SharedFolder("bin");
    std::error_code ec;
    fs::copy_file(own, dir + "/launch", fs::copy_options::overwrite_existing, ec);
    if (ec) throw GraderError("cannot put the grader's launcher where student runs reach it: " + ec.message());
    space->ShareReadOnly(dir);
    chmod((dir + "/launch").c_str(), 0755);
    return graded_launcher = dir + "/launch";
  }

  // A run named `name`: the grader's own (its binaries, in work/grader), or the student's (built
  // in the kit or prebuilt: started by the grader's launcher with --no_spawn; jailed when
  // confined, in a fresh folder in work/student).
  StageRunOptions RunOptions(const std::string& name, const BuildOutcome* student_build) {
    StageRunOptions o;
    o.limits.timeout_s = config.run_timeout_s;
    o.limits.address_space_bytes = config.memory_limit_bytes;
    o.limits.isolate_network = config.isolate_network && geteuid() == 0;
    o.limits.file_size_bytes = int64_t{256} << 20;  // the tiny model and its snapshots are a few MiB
    o.unset_env = kDistEnv;
    const bool from_kit = student_build != nullptr && student_build->from_kit;
    if (from_kit) o.unset_env.insert(o.unset_env.end(), kRunfilesEnv.begin(), kRunfilesEnv.end());
    if (student_build != nullptr) {
      o.no_spawn = true;
      o.launcher = GradedLauncher();
    }
    if (from_kit && space->confined()) {
      o.output_root = space->StudentFolder(name);
      o.limits.jail = space->run_jail();
      o.output_owner = space->student_uid();
    } else {
      o.output_root = space->GraderFolder(name);
    }
    return o;
  }

  std::string GraderBinary(const std::string& configured, const std::string& runfile) const {
    if (!configured.empty()) return configured;
    return FindRunfile(runfile);
  }

  // A binary the grading cannot go on without: its absence is the grader's failure, named.
  std::string RequiredGraderBinary(const std::string& configured, const std::string& runfile,
                                   const std::string& what) const {
    try {
      return GraderBinary(configured, runfile);
    } catch (const std::exception& e) {
      throw GraderError("the grader's " + what + " is missing: " + e.what());
    }
  }

  std::string data_dir;  // the ViT's images (model_type "vit"), made by PrepareData

  uint64_t seed = 0;  // this grading's (config.seed, or drawn in Grade())

  std::vector<std::string> Flags(int ranks) const { return RunFlags(ranks, config.model_type, data_dir, seed); }

  // The ViT's CIFAR-10-format set, written by the grader into a folder student code may read
  // and not change (StudentSpace::SharedFolder): 8 images per class, enough that no run of 5
  // updates of 8 ends an epoch.
  void PrepareData() {
    if (config.model_type != "vit") return;
    const std::string dir = space->SharedFolder("cifar10");
    Progress("writing the ViT's CIFAR-10-format images");
    const std::string binary =
        RequiredGraderBinary(config.cifar_sample_binary, "common/vision/make_sample_cifar10", "image writer");
    SandboxCommand command;
    command.argv = {binary, "--out=" + dir, "--train_per_class=8", "--test_per_class=1"};
    SandboxLimits limits;
    limits.timeout_s = 60;
    const SandboxResult r = RunSandboxed(command, limits);
    if (r.exit_code != 0) {
      throw GraderError("the grader could not write the ViT's images into " + dir + " (exit " +
                        std::to_string(r.exit_code) + "):\n" + Tail(r.output, 10));
    }
    space->ShareReadOnly(dir);
    data_dir = dir;
    Progress("every run trains the tiny ViT on " + dir);
  }

  // Part 1's reference on one process with the whole batch: what every stage must reproduce.
  const Trace& Expected() {
    if (have_expected) return expected;
    Progress("running the grader's own single-node trace (part 1 reference, batch 8)");
    const std::string binary =
        RequiredGraderBinary(config.expected_binary, "part1_single/reference", "reference binary");
    StageRunOptions o = RunOptions("expected", nullptr);
    o.limits.isolate_network = false;
    o.limits.address_space_bytes = 0;
    StageRun r = RunStage(binary, 1, Launcher::kSingle, Flags(1), o);
    if (r.exit_code != 0 || r.log.size() < kSteps) {
      throw GraderError("the grader's own single-node run failed (exit " + std::to_string(r.exit_code) + "):\n" +
                        Tail(r.output, 20));
    }
    expected = TraceOf(r);
    // The weights every rank of a graded run must end with (final_weights.h), and S for the
    // traffic check: the bytes of the model this (trusted) run saved.
    std::ifstream model(r.output_dir + "/model.safetensors", std::ios::binary);
    grader_model.assign(std::istreambuf_iterator<char>(model), {});
    gradient_bytes = TensorBytesOf(grader_model);
    have_expected = true;
    return expected;
  }

  // The grader's runs of the known mistakes, made once, when a failing trace needs a name.
  const std::vector<KnownMistake>& Mistakes() {
    return RunMistakes(
                       {"no_sync", "sum_without_average", "some_params_only", "rank0_keeps_own", "root_only_average",
                        "same_data"},
                       &mistakes_tried, &mistakes, config.mutant_binary, "grading/mutant_stage");
  }
  const std::vector<KnownMistake>& OwnMistakes(const stages::Stage& st) {
    const StageGrading& grading = GradingOf(st.id);
    return RunMistakes(grading.OwnMistakes(), &own_mistakes_tried[st.id], &own_mistakes[st.id], "",
                       grading.MutantBinary());
  }
  // `configured`: a path given in the config ("" : the runfile `runfile`).
  const std::vector<KnownMistake>& RunMistakes(const std::vector<std::string>& names, bool* tried,
                                               std::vector<KnownMistake>* out, const std::string& configured,
                                               const std::string& runfile) {
    if (*tried || !config.recognise_mistakes) return *out;
    *tried = true;
    std::vector<KnownMistake>& mistakes = *out;
    std::string binary;
    try {
      binary = GraderBinary(configured, runfile);
    } catch (const std::exception& e) {
      mistakes_note = std::string("known mistakes not recognised: ") + e.what();
      return mistakes;
    }
    for (const std::string& m : names) {
      Progress("running the known mistake '" + m + "' to compare with");
      StageRunOptions o = RunOptions("mistake_" + m, nullptr);
      std::vector<std::string> flags = Flags(config.ranks);
      flags.push_back("--mutation=" + m);
      StageRun r = RunStage(binary, config.ranks, Launcher::kLaunch, flags, o);
      if (r.exit_code != 0 || r.log.size() < kSteps) {
        mistakes_note = "the grader's run of the known mistake '" + m + "' failed; it is not recognised";
        continue;
      }
      mistakes.push_back({m, TraceOf(r)});
    }
    return mistakes;
  }

  // --- judging a run ----------------------------------------------------------------------

  std::string Diagnose(const Trace& got, const Trace& want, const stages::Stage& st) {
    return grading::Diagnose(got, want, st, GradingOf(st.id), st.grading.ranks > 1 ? config.ranks : 1,
                             [this]() -> const std::vector<KnownMistake>& { return Mistakes(); },
                             [this, &st]() -> const std::vector<KnownMistake>& { return OwnMistakes(st); });
  }

  void GradeStage(const stages::Stage& st, const SubmittedStage& sub, const BuildOutcome& build,
                  GradeReport* report) {
    const std::string ranks_text = st.grading.ranks > 1 ? std::to_string(config.ranks) + " ranks" : "one process";
    TestResult t_build{st.id + ": builds", 0, 0, build.ok, ""};
    TestResult t_run{st.id + ": runs " + std::to_string(kSteps) + " updates on " + ranks_text, 0, 0, false, ""};
    TestResult t_parity{st.id + ": losses and gradient norms match the single-node run", 0, static_cast<double>(st.grading.parity_points), false,
                        ""};
    TestResult t_comm{st.id + ": uses " + JoinOps(st.grading.required_ops, " and "), 0, static_cast<double>(st.grading.comm_points),
                      false, ""};
    const bool has_comm_test = st.grading.comm_points > 0;
    const StageGrading& grading = GradingOf(st.id);
    std::vector<TestResult> extra;  // the stage's own tests (StageGrading::ExtraTests)
    auto finish = [&] {
      for (TestResult* t : {&t_build, &t_run, &t_parity, &t_comm}) {
        if (t == &t_comm && !has_comm_test) continue;
        t->output = Cap(t->output);
        report->tests.push_back(*t);
      }
      for (TestResult& t : extra) {
        t.output = Cap(t.output);
        report->tests.push_back(t);
      }
    };
    auto not_run = [&](const std::string& why) {
      t_run.output = t_parity.output = t_comm.output = why;
      for (TestResult t : grading.ExtraTestNames()) {
        t.output = why;
        extra.push_back(t);
      }
    };

    std::string files;
    for (const auto& [name, path] : sub.files) files += (files.empty() ? "" : ", ") + st.id + "/" + name;
    t_build.output = (files.empty() ? "" : "your files: " + files + "\n") + build.message + "\n";
    if (!build.ok) {
      not_run("not run: the build step did not succeed (see '" + t_build.name + "')\n");
      finish();
      return;
    }

    const int ranks = st.grading.ranks > 1 ? config.ranks : 1;
    int runs = 0;
    // The submission's binary on n ranks with the grader's flags, then `extra` (later flags win).
    auto run = [&](int n, const std::vector<std::string>& extra_flags, double timeout_s) {
      std::string said;
      for (const auto& f : extra_flags) said += " " + f;
      Progress("running " + st.id + " on " + (n > 1 ? std::to_string(n) + " ranks" : "one process") + said);
      std::vector<std::string> flags = Flags(n);
      flags.insert(flags.end(), build.flags.begin(), build.flags.end());
      const std::vector<std::string> own = grading.RunFlags(config.model_type);
      flags.insert(flags.end(), own.begin(), own.end());
      flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
      StageRunOptions o = RunOptions("run_" + st.id + "_" + std::to_string(runs++), &build);
      if (timeout_s > 0) o.limits.timeout_s = std::min(timeout_s, o.limits.timeout_s);
      return RunStage(build.binary, n, n > 1 ? Launcher::kLaunch : Launcher::kSingle, flags, o);
    };
    StageRun r = run(ranks, {}, 0);
    const bool completed =
        r.exit_code == 0 && !r.timed_out && r.log.size() >= kSteps && r.bad_log_lines.empty();
    std::string confinement = Fmt("%.1f", r.seconds) + " s; limits: " + Fmt("%.0f", config.run_timeout_s) + " s, " +
                              Fmt("%.1f", static_cast<double>(config.memory_limit_bytes) / (1 << 30)) +
                              " GiB per process" + (r.network_isolated ? ", loopback-only network" : "");
    if (!r.isolation_note.empty()) confinement += " (" + r.isolation_note + ")";
    if (!completed) {
      t_run.output = RunFailureMessage(r, st, config) + "(" + confinement + ")\n";
      const std::string run_output = t_run.output;
      not_run("not checked: the run did not complete (see '" + t_run.name + "')\n");
      t_run.output = run_output;
      finish();
      return;
    }
    t_run.passed = true;
    t_run.output = "completed " + std::to_string(r.log.size()) + " updates (" + confinement + ")\n";
    try {
      Judge(st, grading, r, run, ranks, has_comm_test, &t_parity, &t_comm, &extra);
    } catch (const GraderError&) {
      throw;
    } catch (const std::exception& e) {
      // Nothing a submission writes stops the grading: this task scores nothing, and says why.
      for (TestResult* t : {&t_parity, &t_comm}) {
        t->passed = false;
        t->score = 0;
      }
      extra.clear();
      const std::string run_output = t_run.output;
      not_run("not graded: the grader could not judge what this run wrote (" + Printable(e.what()) + ")\n");
      t_run.output = run_output;
    }
    finish();
  }

  // The tests of a run that completed: parity with the grader's trace, the stage's own, the
  // collectives called.
  void Judge(const stages::Stage& st, const StageGrading& grading, const StageRun& r,
             const std::function<StageRun(int, const std::vector<std::string>&, double)>& run, int ranks,
             bool has_comm_test, TestResult* t_parity_out, TestResult* t_comm_out, std::vector<TestResult>* extra_out) {
    TestResult& t_parity = *t_parity_out;
    TestResult& t_comm = *t_comm_out;
    std::vector<TestResult>& extra = *extra_out;
    const Trace& want = Expected();
    const Trace got = TraceOf(r);
    std::string diff = ParityDiff(want, got);
    if (diff.empty()) {
      const double worst = WorstDifference(want, got);
      t_parity.passed = true;
      t_parity.score = t_parity.max_score;
      t_parity.output = "the " + std::to_string(kSteps) + " losses and gradient norms match the grader's single-node run (batch " +
                        std::to_string(kTotalBatch) + ") within " + Fmt("%.0e", kParityTol) +
                        " relative (worst " + Fmt("%.1e", worst) + ")\n" + TraceTable(want, got);
    } else {
      t_parity.output = Diagnose(got, want, st) + "\n\n" + diff + ".\n" + TraceTable(want, got);
    }
    // What the log claims against what the kernel counted on the ranks' network.
    const TrafficVerdict traffic = CheckTraffic(r, st, ranks, gradient_bytes, r.log.size());
    traffic.Judge(&t_parity);
    // What every rank ends with, against each other and against the grader's run.
    CheckFinalWeights(r, ranks, grader_model).Judge(&t_parity);

    const std::vector<TestResult> own_tests = grading.ExtraTestNames();
    if (!own_tests.empty()) {
      StageCheckContext c;
      c.ranks = ranks;
      c.model_type = config.model_type;
      c.expected = &want;
      c.run = run;
      c.diagnose = [&](const Trace& trace) { return Diagnose(trace, want, st); };
      c.run_failure = [&](const StageRun& failed) { return RunFailureMessage(failed, st, config); };
      c.traffic = [&](const StageRun& run_of, int n) {
        const TrafficVerdict v = CheckTraffic(run_of, st, n, gradient_bytes, run_of.log.size());
        return v.counted && !v.enough ? v.Describe() : std::string();
      };
      if (traffic.counted && !traffic.enough) {
        // The stage's own tests read this run's log and files: not credited either.
        for (TestResult t : own_tests) {
          t.output = "not credited: " + traffic.Describe() + "\n";
          extra.push_back(t);
        }
      } else {
        extra = grading.ExtraTests(r, c);
      }
    }
    if (has_comm_test) {
      std::string problem = CollectivesProblem(r.log, st.grading.required_ops, st.grading.forbidden_ops);
      if (problem.empty() && traffic.counted && !traffic.enough) {
        problem = "the collectives your log reports were not sent (" + traffic.Describe() + ")";
      }
      if (problem.empty()) {
        t_comm.passed = true;
        t_comm.score = t_comm.max_score;
        t_comm.output = "every update called " + JoinOps(st.grading.required_ops, " and ") + "\n";
      } else {
        t_comm.output = problem + "; " + st.id + " must call " + JoinOps(st.grading.required_ops, " and ") +
                        (st.grading.forbidden_ops.empty() ? "" : " (and not " + JoinOps(st.grading.forbidden_ops, " or ") + ")") +
                        " to synchronise the gradients\n";
      }
    }
  }
};

Autograder::Autograder(GraderConfig config) : impl_(std::make_unique<Impl>()) {
  if (config.ranks < 1 || kTotalBatch % config.ranks != 0) {
    throw GraderError("--ranks=" + std::to_string(config.ranks) + " must divide the total batch of " +
                      std::to_string(kTotalBatch));
  }
  if (config.model_type != "bert" && config.model_type != "vit") {
    throw GraderError("--model_type must be bert or vit, got '" + config.model_type + "'");
  }
  impl_->config = std::move(config);
}

Autograder::~Autograder() = default;

std::vector<std::string> Autograder::RunFlags(int ranks, const std::string& model_type, const std::string& data_dir,
                                              uint64_t seed) {
  // What grading/parity_test.cc uses: the tiny built-in model and data, no dropout, a learning
  // rate that makes a wrong update visible at once, one thread per rank (2 cores, 4 ranks).
  // The ViT's as grading/vit_parity_test.cc: its augmentation stays on (it depends on the seed,
  // the epoch and the example only, so every rank and stage sees the same pixels).
  std::vector<std::string> flags = {"--max_steps=" + std::to_string(kSteps),
                                    "--per_gpu_train_batch_size=" + std::to_string(kTotalBatch / ranks),
                                    "--learning_rate=1e-3",
                                    "--hidden_dropout_prob=0",
                                    "--attention_probs_dropout_prob=0",
                                    "--do_eval=false",
                                    "--num_threads=1",
                                    "--dist_timeout_s=60",
                                    // every rank's final weights, for final_weights.h
                                    "--save_every_rank"};
  if (seed != 0) flags.push_back("--seed=" + std::to_string(seed));
  if (model_type == "vit") {
    flags.insert(flags.end(), {"--model_type=vit", "--task_name=cifar10", "--data_dir=" + data_dir});
  } else {
    flags.push_back("--max_seq_length=64");
  }
  return flags;
}

GradeReport Autograder::Grade(const GradeRequest& req) {
  Impl& im = *impl_;
  GradeReport report;
  const auto started = std::chrono::steady_clock::now();
  const std::string work = MakeTempDir("autograde", im.config.work_root);
  struct Cleanup {
    std::string dir;
    bool keep;
    ~Cleanup() {
      if (!keep) RemoveTree(dir);
    }
  } cleanup{work, im.config.keep_work};
  if (im.config.keep_work) report.notes.push_back("work folder kept: " + work);

  // A new secret for every grading, and a new trace: nothing computed before this grading (the
  // handout's numbers, an earlier grading's) is the answer to this one. With a seed the
  // instructor (or a test) set, the traces of the last grading still hold.
  const uint64_t seed = im.config.seed != 0 ? im.config.seed : DrawSeed();
  if (seed != im.seed) {
    im.seed = seed;
    im.have_expected = false;
    im.mistakes_tried = false;
    im.mistakes.clear();
    im.own_mistakes_tried.clear();
    im.own_mistakes.clear();
  }
  im.graded_launcher.clear();
  im.space = std::make_unique<StudentSpace>(im.config, work);
  report.notes.push_back(std::string("every run used a seed ") +
                         (im.config.seed != 0 ? "set by the instructor" : "drawn for this grading") +
                         " (model initialisation, data order), not the handout's 42: your numbers differ from your "
                         "self-check's, and are compared with the grader's own run on the same seed");
  im.PrepareData();
  if (im.config.model_type == "vit") {
    report.notes.push_back("every run trained the tiny ViT on a CIFAR-10-format set (--model_type=vit), not the "
                           "tiny BERT");
  }
  Submission sub = LoadSubmission(req.submission, im.space->GraderFolder("submission"));
  report.notes.insert(report.notes.end(), sub.notes.begin(), sub.notes.end());
  for (const auto& i : sub.ignored) report.notes.push_back("ignored: " + i);
  std::vector<const stages::Stage*> graded;
  for (const auto& st : stages::All()) {
    if (!st.grading.optional || sub.stages.at(st.id).folder_present) {
      graded.push_back(&st);
    } else {
      report.notes.push_back(st.id + "/ is optional and was not submitted: not graded");
    }
  }
  std::map<std::string, BuildOutcome> builds;
  if (!sub.fatal.empty()) {
    for (const stages::Stage* st : graded) builds[st->id].message = "the submission could not be read: " + sub.fatal;
  } else {
    builds = BuildSubmission(im.config, graded, sub, req.prebuilt, im.space.get(), &report.notes);
  }
  if (const std::string d = im.space->Description(); !d.empty()) report.notes.push_back(d);
  for (const stages::Stage* st : graded) im.GradeStage(*st, sub.stages.at(st->id), builds[st->id], &report);
  if (!im.mistakes_note.empty()) report.notes.push_back(im.mistakes_note);
  report.execution_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace distlm::grading
