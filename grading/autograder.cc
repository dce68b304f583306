// Autograder: Grade() reads the submission, builds it (kit_build.cc) and grades each stage
// (grade_stage.cc); here too are the grader's own runs every stage is compared with (its
// single-node trace, the known mistakes) and the options every run gets.
#include "grading/autograder.h"

#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/runtime/runfiles.h"
#include "grading/autograder_impl.h"
#include "grading/final_weights.h"
#include "grading/kit_build.h"
#include "grading/jail/sandbox.h"
#include "grading/stage_grading.h"
#include "grading/jail/student_space.h"
#include "grading/submission.h"
#include "grading/text.h"
#include "grading/traffic_check.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

// Launcher and MPI variables the grader may have inherited; a run starts clean of them.
const std::vector<std::string> kDistEnv = {"RANK",        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                           "GROUP_RANK",  "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID",
                                           "SLURM_NTASKS"};
// A binary built in the kit finds its data beside itself, not among the grader's runfiles.
const std::vector<std::string> kRunfilesEnv = {"RUNFILES_DIR", "RUNFILES_MANIFEST_FILE", "TEST_SRCDIR",
                                               "JAVA_RUNFILES"};

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

const std::string& Autograder::Impl::GradedLauncher() {
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

StageRunOptions Autograder::Impl::RunOptions(const std::string& name, const BuildOutcome* student_build) {
  StageRunOptions o;
  o.limits.timeout_s = config.run_timeout_s;
  o.limits.address_space_bytes = config.memory_limit_bytes;
  o.limits.isolate_network = config.isolate_network && geteuid() == 0;
  o.limits.file_size_bytes = int64_t{256} << 20;  // the tiny model and its snapshots are a few MiB
  o.unset_env = kDistEnv;
  // Every block of 64 KiB or more a mapping of its own, given back to the kernel when freed:
  // then a process's high-water mark (process_watch.h) is the peak of what it had live, the same
  // to within 0.5 MB run after run. With malloc's own sliding threshold the freed memory of a
  // thread's arena goes back through madvise, which the mark may miss, and the same 1F1B run
  // peaked anywhere in 307-321 MB (measured). The student's runs and the grader's alike.
  o.env["GLIBC_TUNABLES"] = "glibc.malloc.mmap_threshold=65536";
  const bool from_kit = student_build != nullptr && student_build->from_kit;
  if (from_kit) o.unset_env.insert(o.unset_env.end(), kRunfilesEnv.begin(), kRunfilesEnv.end());
  if (student_build != nullptr) {
    o.no_spawn = true;
    o.launcher = GradedLauncher();
  }
  if (from_kit && space->confined()) {
    o.output_root = space->StudentFolder(name);
    o.limits.jail = space->RunJail(o.output_root);
    o.output_owner = space->student_uid();
  } else {
    o.output_root = space->GraderFolder(name);
  }
  return o;
}

std::string Autograder::Impl::GraderBinary(const std::string& configured, const std::string& runfile) const {
  if (!configured.empty()) return configured;
  return FindRunfile(runfile);
}

std::string Autograder::Impl::RequiredGraderBinary(const std::string& configured, const std::string& runfile,
                                                   const std::string& what) const {
  try {
    return GraderBinary(configured, runfile);
  } catch (const std::exception& e) {
    throw GraderError("the grader's " + what + " is missing: " + e.what());
  }
}

void Autograder::Impl::PrepareData() {
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

StageRun Autograder::Impl::SingleNodeRun(const std::string& name, const std::vector<std::string>& extra) {
  const std::string binary =
      RequiredGraderBinary(config.expected_binary, "part1/reference", "reference binary");
  StageRunOptions o = RunOptions(name, nullptr);
  o.limits.isolate_network = false;
  o.limits.address_space_bytes = 0;
  std::vector<std::string> flags = Flags(1);
  flags.insert(flags.end(), extra.begin(), extra.end());
  return RunStage(binary, 1, Launcher::kSingle, flags, o);
}

const Trace& Autograder::Impl::Expected() {
  if (have_expected) return expected;
  Progress("running the grader's own single-node trace (part 1 reference, batch 8)");
  StageRun r = SingleNodeRun("expected", {});
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
  expected_peak_memory = r.peak_memory_bytes;
  have_expected = true;
  return expected;
}

const std::vector<KnownMistake>& Autograder::Impl::Mistakes() {
  return RunMistakes({"no_sync", "sum_without_average", "some_params_only", "rank0_keeps_own", "root_only_average",
                      "same_data"},
                     &mistakes_tried, &mistakes, config.mutant_binary, "grading/mutant_stage", config.ranks,
                     config.ranks);
}

const std::vector<KnownMistake>& Autograder::Impl::OwnMistakes(const stages::Row& st) {
  const StageGrading& grading = GradingOf(st.id);
  const int ranks = st.RunRanks(config.ranks);
  return RunMistakes(grading.OwnMistakes(), &own_mistakes_tried[st.id], &own_mistakes[st.id], "",
                     grading.MutantBinary(), ranks, st.Replicas(ranks));
}

const std::vector<KnownMistake>& Autograder::Impl::RunMistakes(const std::vector<std::string>& names, bool* tried,
                                                               std::vector<KnownMistake>* out,
                                                               const std::string& configured,
                                                               const std::string& runfile, int ranks,
                                                               int replicas) {
  if (*tried || !config.recognise_mistakes) return *out;
  *tried = true;
  std::vector<KnownMistake>& mistakes = *out;
  std::string binary;
  try {
    binary = GraderBinary(configured, runfile);
  } catch (const std::exception& e) {
    Note(std::string("known mistakes not recognised: ") + e.what());
    return mistakes;
  }
  for (const std::string& m : names) {
    Progress("running the known mistake '" + m + "' to compare with");
    StageRunOptions o = RunOptions("mistake_" + m, nullptr);
    std::vector<std::string> flags = Flags(replicas);
    flags.push_back("--mutation=" + m);
    StageRun r = RunStage(binary, ranks, Launcher::kLaunch, flags, o);
    if (r.exit_code != 0 || r.log.size() < kSteps) {
      Note("the grader's run of the known mistake '" + m + "' failed; it is not recognised");
      continue;
    }
    mistakes.push_back({m, TraceOf(r)});
  }
  return mistakes;
}

const Autograder::Impl::ReferenceFigures& Autograder::Impl::ReferenceRun(const stages::Row& st,
                                                                         const StageGrading& grading, int ranks,
                                                                         const std::vector<std::string>& extra) {
  std::vector<std::string> flags = StageFlags(st, grading, ranks, {}, extra);
  flags.push_back("--mutation=" + grading.ReferenceMutation());
  std::string key = st.id + " x" + std::to_string(ranks);
  for (const auto& f : flags) key += " " + f;
  if (auto it = reference_runs.find(key); it != reference_runs.end()) return it->second;
  ReferenceFigures& figures = reference_runs[key];
  std::string binary;
  try {
    binary = GraderBinary("", grading.MutantBinary());
  } catch (const std::exception& e) {
    Note(st.id + "'s traffic and memory not checked: " + e.what());
    return figures;
  }
  std::string said;
  for (const auto& f : extra) said += " " + f;
  Progress("running the grader's own " + st.id + " on " + std::to_string(ranks) + " ranks" +
           (said.empty() ? "" : " with" + said) + ", to count what it sends and holds");
  const StageRun r = RunStage(binary, ranks, Launcher::kLaunch, flags,
                              RunOptions("reference_" + st.id + "_" + std::to_string(reference_runs.size()), nullptr));
  if (r.exit_code != 0 || r.log.size() < kSteps) {
    Note("the grader's own run of " + st.id + " on " + std::to_string(ranks) + " ranks" + (said.empty() ? "" : " with" + said) +
         " failed; its traffic and memory are not checked");
    return figures;
  }
  if (r.network_bytes > 0) figures.bytes = static_cast<double>(r.network_bytes);
  figures.peak_memory_bytes = r.peak_memory_bytes;
  figures.peak_cpu_seconds = r.peak_cpu_seconds;
  return figures;
}

const Autograder::Impl::LongSingle& Autograder::Impl::LongSingleRun() {
  if (long_single.tried) return long_single;
  long_single.tried = true;
  // The whole batch on one process: part 1's reference, as for the grader's trace.
  Progress("running the grader's own single-node run at 512 tokens a sequence, to see what one rank's share costs");
  const StageRun one = SingleNodeRun("expected_512", ShareRunFlags());
  if (one.exit_code == 0 && one.log.size() >= kSteps) {
    long_single.ok = true;
    long_single.trace = TraceOf(one);
    long_single.figures = {one.peak_memory_bytes, one.peak_cpu_seconds};
  } else {
    Note("the grader's own single-node run at 512 tokens failed; each rank's share is not checked");
  }
  return long_single;
}

ShareFigures Autograder::Impl::LongDataParallel(int ranks) {
  if (auto it = long_data_parallel.find(ranks); it != long_data_parallel.end()) return it->second;
  ShareFigures& figures = long_data_parallel[ranks];
  std::string binary;
  try {
    binary = GraderBinary(config.mutant_binary, "grading/mutant_stage");
  } catch (const std::exception& e) {
    Note(std::string("each rank's share not checked: ") + e.what());
    return figures;
  }
  // Task 2b's reference (the all_reduce of every gradient) on the same ranks.
  Progress("running the grader's own data-parallel run on " + std::to_string(ranks) + " ranks at 512 tokens");
  std::vector<std::string> flags = Flags(ranks);
  for (const std::string& f : ShareRunFlags()) flags.push_back(f);
  flags.push_back("--mutation=none");
  const StageRun dp = RunStage(binary, ranks, Launcher::kLaunch, flags, RunOptions("share_" + std::to_string(ranks), nullptr));
  if (dp.exit_code == 0 && dp.log.size() >= kSteps) {
    figures = {dp.peak_memory_bytes, dp.peak_cpu_seconds};
  } else {
    Note("the grader's own data-parallel run at 512 tokens failed; each rank's share is not checked");
  }
  return figures;
}

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

std::vector<std::string> Autograder::RunFlags(int replicas, const std::string& model_type, const std::string& data_dir,
                                              uint64_t seed) {
  // What task2a/parity_test.cc uses: the tiny built-in model and data, no dropout, a learning
  // rate that makes a wrong update visible at once, one thread per rank (2 cores, 4 ranks).
  // The ViT's as grading/vit_parity_test.cc: its augmentation stays on (it depends on the seed,
  // the epoch and the example only, so every rank and stage sees the same pixels).
  std::vector<std::string> flags = {"--max_steps=" + std::to_string(kSteps),
                                    "--per_gpu_train_batch_size=" + std::to_string(kTotalBatch / replicas),
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
    im.reference_runs.clear();
    im.long_single = {};
    im.long_data_parallel.clear();
    im.grader_notes.clear();
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
  std::vector<const stages::Row*> graded;
  for (const auto& st : stages::All()) {
    if (!st.Trains(im.config.model_type)) {
      if (sub.stages.at(st.id).folder_present) {
        std::string models;
        for (const auto& m : st.models) models += (models.empty() ? "" : ", ") + m;
        report.notes.push_back(st.id + "/ is not graded with --model_type=" + im.config.model_type + ": " + st.id +
                               " trains " + models + " only");
      }
    } else if (!st.grading.optional || sub.stages.at(st.id).folder_present) {
      graded.push_back(&st);
    } else {
      report.notes.push_back(st.id + "/ is optional and was not submitted: not graded");
    }
  }
  std::map<std::string, BuildOutcome> builds;
  if (!sub.fatal.empty()) {
    for (const stages::Row* st : graded) builds[st->id].message = "the submission could not be read: " + sub.fatal;
  } else {
    builds = BuildSubmission(im.config, graded, sub, req.prebuilt, im.space.get(), &report.notes);
  }
  // From here on student code runs, each run writing only in its own folder (student_space.h).
  im.space->SealForRuns();
  if (const std::string d = im.space->Description(); !d.empty()) report.notes.push_back(d);
  for (const stages::Row* st : graded) im.GradeStage(*st, sub.stages.at(st->id), builds[st->id], &report);
  report.notes.insert(report.notes.end(), im.grader_notes.begin(), im.grader_notes.end());
  report.execution_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace distlm::grading
