#include "grading/grader_runs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/runtime/runfiles.h"
#include "grading/final_weights.h"
#include "grading/jail/grader_error.h"
#include "grading/jail/sandbox.h"
#include "grading/text.h"
#include "grading/traffic_check.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

// What a run of the grader's own is remembered by: the stage, its ranks and every flag.
std::string RunKey(const stages::Row& st, int ranks, const std::vector<std::string>& flags) {
  std::string key = st.id + " x" + std::to_string(ranks);
  for (const auto& f : flags) key += " " + f;
  return key;
}

// Launcher and MPI variables the grader may have inherited; a run starts clean of them.
const std::vector<std::string> kDistEnv = {"RANK",        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                           "GROUP_RANK",  "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID",
                                           "SLURM_NTASKS"};
// Under `bazel run` the grader's caller's folders: a run must not follow them (the launcher would
// change into the caller's folder, which a jail need not have: an honest grading started from
// a clone in a home folder failed every multi-rank run with "cannot enter DIR").
const std::vector<std::string> kBazelRunEnv = {"BUILD_WORKING_DIRECTORY", "BUILD_WORKSPACE_DIRECTORY"};
// A binary built in the kit finds its data beside itself, not among the grader's runfiles.
const std::vector<std::string> kRunfilesEnv = {"RUNFILES_DIR", "RUNFILES_MANIFEST_FILE", "TEST_SRCDIR",
                                               "JAVA_RUNFILES"};

// The bytes of the model.safetensors (rank 0's) a run saved; "" where it saved none.
std::string ModelBytes(const StageRun& r) {
  std::ifstream model(r.output_dir + "/model.safetensors", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(model), {});
}

}  // namespace

void GraderRuns::StartGrading(StudentSpace* space, uint64_t seed) {
  if (seed != seed_) {
    seed_ = seed;
    have_expected_ = false;
    mean_of_shards_.clear();
    mistakes_tried_ = false;
    mistakes_.clear();
    own_mistakes_tried_.clear();
    own_mistakes_.clear();
    reference_runs_.clear();
    long_single_ = {};
    long_data_parallel_.clear();
    notes_.clear();
  }
  space_ = space;
  graded_launcher_.clear();
  data_dir_.clear();
  PrepareData();
}

void GraderRuns::Note(const std::string& note) {
  if (std::find(notes_.begin(), notes_.end(), note) == notes_.end()) notes_.push_back(note);
}

std::vector<std::string> GraderRuns::Flags(int replicas) const {
  return Autograder::RunFlags(replicas, config_.model_type, data_dir_, seed_);
}

std::vector<std::string> GraderRuns::StageFlags(const stages::Row& st, const StageGrading& grading, int ranks,
                                                const std::vector<std::string>& build,
                                                const std::vector<std::string>& extra) const {
  std::vector<std::string> flags = Flags(st.Replicas(ranks));
  flags.insert(flags.end(), build.begin(), build.end());
  const std::vector<std::string> own = grading.RunFlags(config_.model_type);
  flags.insert(flags.end(), own.begin(), own.end());
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

const std::string& GraderRuns::GradedLauncher() {
  if (!graded_launcher_.empty()) return graded_launcher_;
  const std::string own = RequiredGraderBinary("", "tools/launch", "launcher");
  if (!space_->confined()) return graded_launcher_ = own;
  const std::string dir = space_->SharedFolder("bin");
  std::error_code ec;
  fs::copy_file(own, dir + "/launch", fs::copy_options::overwrite_existing, ec);
  if (ec) throw GraderError("cannot put the grader's launcher where student runs reach it: " + ec.message());
  space_->ShareReadOnly(dir);
  chmod((dir + "/launch").c_str(), 0755);
  return graded_launcher_ = dir + "/launch";
}

StageRunOptions GraderRuns::RunOptions(const std::string& name, const BuildOutcome* student_build) {
  StageRunOptions o;
  o.limits.timeout_s = config_.run_timeout_s;
  o.limits.address_space_bytes = config_.memory_limit_bytes;
  o.limits.isolate_network = config_.isolate_network && geteuid() == 0;
  o.limits.file_size_bytes = int64_t{256} << 20;  // the tiny model and its snapshots are a few MiB
  o.unset_env = kDistEnv;
  o.unset_env.insert(o.unset_env.end(), kBazelRunEnv.begin(), kBazelRunEnv.end());
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
  if (from_kit && space_->confined()) {
    o.output_root = space_->StudentFolder(name);
    o.limits.jail = space_->RunJail(o.output_root);
    o.output_owner = space_->student_uid();
  } else {
    o.output_root = space_->GraderFolder(name);
  }
  return o;
}

std::string GraderRuns::GraderBinary(const std::string& configured, const std::string& runfile) const {
  if (!configured.empty()) return configured;
  return FindRunfile(runfile);
}

std::string GraderRuns::RequiredGraderBinary(const std::string& configured, const std::string& runfile,
                                                   const std::string& what) const {
  try {
    return GraderBinary(configured, runfile);
  } catch (const std::exception& e) {
    throw GraderError("the grader's " + what + " is missing: " + e.what());
  }
}

void GraderRuns::PrepareData() {
  if (config_.model_type != "vit") return;
  const std::string dir = space_->SharedFolder("cifar10");
  Progress("writing the ViT's CIFAR-10-format images");
  const std::string binary =
      RequiredGraderBinary(config_.cifar_sample_binary, "common/vision/make_sample_cifar10", "image writer");
  SandboxCommand command;
  command.argv = {binary, "--out=" + dir, "--train_per_class=8", "--test_per_class=1"};
  SandboxLimits limits;
  limits.timeout_s = 60;
  const SandboxResult r = RunSandboxed(command, limits);
  if (r.exit_code != 0) {
    throw GraderError("the grader could not write the ViT's images into " + dir + " (exit " +
                      std::to_string(r.exit_code) + "):\n" + Tail(r.output, 10));
  }
  space_->ShareReadOnly(dir);
  data_dir_ = dir;
  Progress("every run trains the tiny ViT on " + dir);
}

StageRun GraderRuns::SingleNodeRun(const std::string& name, const std::vector<std::string>& extra, int replicas) {
  const std::string binary =
      RequiredGraderBinary(config_.expected_binary, "part1/reference", "reference binary");
  StageRunOptions o = RunOptions(name, nullptr);
  o.limits.isolate_network = false;
  o.limits.address_space_bytes = 0;
  std::vector<std::string> flags = Flags(replicas);
  flags.insert(flags.end(), extra.begin(), extra.end());
  return RunStage(binary, 1, Launcher::kSingle, flags, o);
}

const GraderRuns::SingleNode& GraderRuns::Expected() {
  if (have_expected_) return expected_;
  Progress("running the grader's own single-node trace (part 1 reference, batch 8)");
  StageRun r = SingleNodeRun("expected", {});
  if (r.exit_code != 0 || r.log.size() < kSteps) {
    throw GraderError("the grader's own single-node run failed (exit " + std::to_string(r.exit_code) + "):\n" +
                      Tail(r.output, 20));
  }
  expected_.trace = TraceOf(r);
  expected_.model = ModelBytes(r);
  expected_.gradient_bytes = TensorBytesOf(expected_.model);
  expected_.peak_memory_bytes = r.peak_memory_bytes;
  have_expected_ = true;
  return expected_;
}

const GraderRuns::SingleNode& GraderRuns::MeanOfShards(int ranks) {
  if (auto it = mean_of_shards_.find(ranks); it != mean_of_shards_.end()) return it->second;
  Progress("running the grader's own part 1 on each of " + std::to_string(ranks) + " shards (batch " +
           std::to_string(kTotalBatch / ranks) + ")");
  SingleNode out;
  std::vector<std::string> models;
  const std::string of = "/" + std::to_string(ranks);
  for (int r = 0; r < ranks; ++r) {
    const StageRun run = SingleNodeRun("shard_" + std::to_string(r) + "_of_" + std::to_string(ranks),
                                       {"--data_shard=" + std::to_string(r) + of}, ranks);
    if (run.exit_code != 0 || run.log.size() < kSteps) {
      throw GraderError("the grader's own part 1 run on shard " + std::to_string(r) + "/" + std::to_string(ranks) +
                        " failed (exit " + std::to_string(run.exit_code) + "):\n" + Tail(run.output, 20));
    }
    if (r == 0) out.trace = TraceOf(run);
    models.push_back(ModelBytes(run));
  }
  out.model = MeanOfModels(models);
  const StageRun start = SingleNodeRun("start_of_" + std::to_string(ranks),
                                       {"--data_shard=0" + of, "--max_steps=1", "--learning_rate=1e-30"}, ranks);
  if (start.exit_code == 0) out.start_model = ModelBytes(start);
  return mean_of_shards_[ranks] = out;
}

const std::vector<KnownMistake>& GraderRuns::Mistakes() {
  return RunMistakes(DataParallelMistakes(), &mistakes_tried_, &mistakes_, config_.mutant_binary, "grading/mutant_stage",
                     config_.ranks, config_.ranks);
}

const std::vector<KnownMistake>& GraderRuns::OwnMistakes(const stages::Row& st) {
  const StageGrading& grading = GradingOf(st.id);
  const int ranks = st.RunRanks(config_.ranks);
  return RunMistakes(grading.OwnMistakes(), &own_mistakes_tried_[st.id], &own_mistakes_[st.id], "",
                     grading.MutantBinary(), ranks, st.Replicas(ranks));
}

const std::vector<KnownMistake>& GraderRuns::RunMistakes(const std::vector<std::string>& names, bool* tried,
                                                               std::vector<KnownMistake>* out,
                                                               const std::string& configured,
                                                               const std::string& runfile, int ranks,
                                                               int replicas) {
  if (*tried || !config_.recognise_mistakes) return *out;
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

const GraderRuns::ReferenceFigures& GraderRuns::ReferenceRun(const stages::Row& st,
                                                                         const StageGrading& grading, int ranks,
                                                                         const std::vector<std::string>& extra,
                                                                         bool again, const LostWorker& lost) {
  // The reference's --mutation before `extra`, which may name another of the stage's mutants.
  std::vector<std::string> flags = StageFlags(st, grading, ranks, {"--mutation=" + grading.ReferenceMutation()}, extra);
  const std::string key = RunKey(st, ranks, flags) + lost.Key();
  if (auto it = reference_runs_.find(key); it != reference_runs_.end() && !again) return it->second;
  ReferenceFigures& figures = reference_runs_[key];
  figures = ReferenceFigures();
  std::string binary;
  try {
    binary = GraderBinary("", grading.MutantBinary());
  } catch (const std::exception& e) {
    Note(st.id + "'s traffic and memory not checked: " + e.what());
    return figures;
  }
  const std::string said = FlagsSaid(extra);
  Progress("running the grader's own " + st.id + " on " + std::to_string(ranks) + " ranks" +
           (said.empty() ? "" : " with" + said) + lost.Said() + ", to count what it sends and holds");
  StageRunOptions options = RunOptions("reference_" + st.id + "_" + std::to_string(reference_run_count_++), nullptr);
  options.lost = lost;
  const StageRun r = RunStage(binary, ranks, Launcher::kLaunch, flags, options);
  if (r.exit_code != 0 || r.log.size() < kSteps) {
    Note("the grader's own run of " + st.id + " on " + std::to_string(ranks) + " ranks" + (said.empty() ? "" : " with" + said) +
         " failed; its traffic and memory are not checked");
    return figures;
  }
  if (r.network_bytes > 0) figures.bytes = static_cast<double>(r.network_bytes);
  figures.share = FiguresOf(r);
  figures.trace = TraceOf(r);
  figures.model = ModelBytes(r);
  return figures;
}

GraderRuns::OverlapRuns& GraderRuns::OverlapYardsticks(const stages::Row& st, const StageGrading& grading,
                                                       int ranks, const std::vector<std::string>& extra) {
  std::vector<std::string> flags = StageFlags(st, grading, ranks, {}, extra);
  for (const std::string& f : OverlapRunFlags(config_.model_type)) flags.push_back(f);
  const std::string key = RunKey(st, ranks, flags);
  if (auto it = overlap_runs_.find(key); it != overlap_runs_.end()) return it->second;
  OverlapRuns& out = overlap_runs_[key];
  if (!TimeOverlapPair(st, grading, ranks, extra, kOverlapLinkBytesPerS, &out, "overlap is not judged by time")) {
    out = {};
    return out;
  }
  // Once more at a rate set from what these two runs show, where they came out too close; the
  // wider of the two pairs' gaps is kept.
  if (const uint64_t next = NextOverlapRate(out.times, out.bytes); next != 0) {
    OverlapRuns again;
    if (TimeOverlapPair(st, grading, ranks, extra, next, &again, "the first rate's runs are kept") &&
        GapShare(again.times) > GapShare(out.times)) {
      out = again;
    }
  }
  // Each kind timed twice on the link kept, its fastest run standing for it: a busy host only
  // slows a run, and a bar set by one slowed serial run would credit a serial submission in the
  // first round. (Runs too short to judge by need no second pair.)
  if (out.times.overlapped_s >= kMinOverlapRunS) {
    OverlapRuns second;
    if (TimeOverlapPair(st, grading, ranks, extra, out.times.rate_bytes_per_s, &second, "the first pair's runs are kept")) {
      KeepFastestGraderRuns(out.times, second.times);
    }
  }
  out.times_fresh = true;
  return out;
}

bool GraderRuns::TimeOverlapPair(const stages::Row& st, const StageGrading& grading, int ranks,
                                 const std::vector<std::string>& extra, uint64_t rate, OverlapRuns* pair,
                                 const std::string& if_failed) {
  std::vector<std::string> flags = StageFlags(st, grading, ranks, {}, extra);
  for (const std::string& f : OverlapRunFlags(config_.model_type)) flags.push_back(f);
  std::string binary;
  try {
    binary = GraderBinary("", grading.MutantBinary());
  } catch (const std::exception& e) {
    Note(st.id + "'s overlap not judged by time: " + e.what());
    return false;
  }
  pair->times.rate_bytes_per_s = rate;
  for (const bool overlapped : {true, false}) {
    std::vector<std::string> run_flags = flags;
    for (const std::string& f : grading.OverlapMutantFlags(overlapped)) run_flags.push_back(f);
    const std::string kind = overlapped ? "overlapped" : "serial";
    Progress("running the grader's own " + st.id + " on " + std::to_string(ranks) + " ranks on a " + LinkWords(rate) +
             " link (" + kind + "), to time overlap");
    StageRunOptions o = RunOptions(
        "overlap_" + st.id + "_" + kind + "_" + std::to_string(overlap_run_count_++) + "_" + std::to_string(rate), nullptr);
    o.limits.loopback_rate_bytes_per_s = rate;
    const StageRun r = RunStage(binary, ranks, Launcher::kLaunch, run_flags, o);
    if (!r.Completed(kOverlapSteps) || r.loopback_rate != rate) {
      Note("the grader's own " + kind + " run of " + st.id + " on a limited link " +
           (r.Completed(kOverlapSteps) ? "had no limited link (" + r.isolation_note + ")" : "failed") + "; " + if_failed);
      return false;
    }
    (overlapped ? pair->times.overlapped_s : pair->times.serial_s) = r.seconds;
    if (overlapped) {
      pair->trace = TraceOf(r);
      pair->bytes = static_cast<double>(r.network_bytes);
    }
  }
  return true;
}

const GraderRuns::LongSingle& GraderRuns::LongSingleRun() {
  if (long_single_.tried) return long_single_;
  long_single_.tried = true;
  // The whole batch on one process: part 1's reference, as for the grader's trace.
  Progress("running the grader's own single-node run at 512 tokens a sequence, to see what one rank's share costs");
  const StageRun one = SingleNodeRun("expected_512", ShareRunFlags());
  if (one.exit_code == 0 && one.log.size() >= kSteps) {
    long_single_.ok = true;
    long_single_.trace = TraceOf(one);
    long_single_.figures = FiguresOf(one);
  } else {
    Note("the grader's own single-node run at 512 tokens failed; each rank's share is not checked");
  }
  return long_single_;
}

ShareFigures GraderRuns::LongDataParallel(int ranks) {
  if (auto it = long_data_parallel_.find(ranks); it != long_data_parallel_.end()) return it->second;
  ShareFigures& figures = long_data_parallel_[ranks];
  std::string binary;
  try {
    binary = GraderBinary(config_.mutant_binary, "grading/mutant_stage");
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
    figures = FiguresOf(dp);
  } else {
    Note("the grader's own data-parallel run at 512 tokens failed; each rank's share is not checked");
  }
  return figures;
}

}  // namespace distlm::grading
