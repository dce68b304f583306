// The grader's own runs, which every graded run is compared with, each made once per grading
// seed and only when a grading needs it: part 1's reference on one process (the trace, final
// weights, gradient bytes and memory every stage must reproduce), the known mistakes (to name a
// failing trace), each stage's reference seen from outside its processes (the bytes it sent,
// the most memory and CPU one of its processes used), and the share check's runs at 512 tokens.
// Here too are the options every run gets, the grader's and the student's: the launcher they
// start through, their folders and jails, their limits and environment.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "grading/autograder.h"
#include "grading/diagnosis.h"
#include "grading/jail/student_space.h"
#include "grading/kit_build.h"
#include "grading/overlap_check.h"
#include "grading/share_check.h"
#include "grading/stage_grading.h"
#include "grading/stage_runner.h"
#include "grading/trace.h"

namespace distlm::grading {

// What the share check reads of a run: its busiest process's figures and the whole run's.
inline ShareFigures FiguresOf(const StageRun& r) {
  return {r.peak_memory_bytes, r.peak_cpu_seconds, r.run_memory_bytes, r.run_cpu_seconds};
}

// The mistakes of data-parallel training the grader runs (grading/mutant_stage's mutations) to
// name a wrong trace of any stage.
inline const std::vector<std::string>& DataParallelMistakes() {
  static const std::vector<std::string> names = {"no_sync",         "sum_without_average", "some_params_only",
                                                 "rank0_keeps_own", "root_only_average",   "same_data"};
  return names;
}

class GraderRuns {
 public:
  explicit GraderRuns(const GraderConfig& config) : config_(config) {}

  // A grading in `space` (kept, not owned) with `seed`: runs made for another seed are forgotten,
  // those of an earlier grading on the same seed kept. Writes the ViT's images when it trains.
  void StartGrading(StudentSpace* space, uint64_t seed);

  // Part 1's reference on one process with the whole batch and the grader's flags: the trace every
  // stage must reproduce, the model it saved (the weights every rank must end with) and the bytes
  // of its gradients (S for the traffic check), and what its process held at most.
  struct SingleNode {
    Trace trace;
    std::string model;          // model.safetensors' bytes
    double gradient_bytes = 0;  // 0: unknown, traffic not checked
    int64_t peak_memory_bytes = -1;
    std::string start_model;    // MeanOfShards only: the weights every worker starts from
  };
  const SingleNode& Expected();
  // For a stage whose workers train alone on shards (StageGrading::TrainsOnShardsAlone): part 1's
  // reference on one process per shard of `ranks` (--data_shard=r/ranks, a rank's batch): shard
  // 0's trace, and the mean of the shards' models (MeanOfModels); the weights they start from (a
  // run of one update at a learning rate of 1e-30, which moves no float32 weight). No gradient
  // bytes, no memory.
  const SingleNode& MeanOfShards(int ranks);

  // The known mistakes' traces, made when a failing trace needs a name: the data-parallel ones
  // every stage may make, and a stage's own (StageGrading::OwnMistakes).
  const std::vector<KnownMistake>& Mistakes();
  const std::vector<KnownMistake>& OwnMistakes(const stages::Row& st);

  // For a stage whose traffic has no closed form (StageGrading::ReferenceMutation): what the
  // grader's own reference did on `ranks` ranks with the stage's flags and `extra`, counted as a
  // graded run's is (-1 each where it could not be run or counted). `again`: run it anew rather
  // than answer the figures of an earlier run of the same layout. `lost`: task 8c's run, a worker
  // lost and a joiner in its place (stage_runner.h).
  struct ReferenceFigures {
    double bytes = -1;
    ShareFigures share;  // its busiest process's memory and CPU time, and the whole run's
    Trace trace;         // empty where it failed
    std::string model;   // rank 0's model.safetensors' bytes
  };
  const ReferenceFigures& ReferenceRun(const stages::Row& st, const StageGrading& grading, int ranks,
                                       const std::vector<std::string>& extra, bool again = false,
                                       const LostWorker& lost = {});

  // The share check's runs at 512 tokens a sequence (share_check.h): the whole batch on one
  // process (its trace, which a student's run at that length must match), and task 2b's
  // reference on `ranks` ranks.
  struct LongSingle {
    bool tried = false;
    bool ok = false;
    Trace trace;
    ShareFigures figures;
  };
  const LongSingle& LongSingleRun();
  ShareFigures LongDataParallel(int ranks);

  // Overlap judged by time (overlap_check.h): the grader's own runs of `st`'s layout `extra` on
  // `ranks` ranks with OverlapRunFlags(), on the limited link, overlapped and serial
  // (StageGrading::OverlapMutantFlags). `trace` and `bytes` are the overlapped run's, which the
  // submission's run on the same flags must match and reach. The yardsticks are two pairs on
  // one link, each kind's fastest run kept; a later round's pair on that link lowers them too.
  struct OverlapRuns {
    OverlapTimes times;  // submission_s unset
    Trace trace;
    double bytes = -1;
    // Whether `times` still wait to serve as the grader's runs of a first round, the one
    // timed right after them (overlap_check.h: TimeOverlapRound): once, as later checks of the
    // same layout come minutes later.
    bool times_fresh = false;
  };
  OverlapRuns& OverlapYardsticks(const stages::Row& st, const StageGrading& grading, int ranks,
                                       const std::vector<std::string>& extra);
  // One pair of those runs, timed now on the link of `rate` (bytes a second), into `pair`; false
  // (and a note ending in `if_failed`) where either failed or had no limited link.
  bool TimeOverlapPair(const stages::Row& st, const StageGrading& grading, int ranks,
                       const std::vector<std::string>& extra, uint64_t rate, OverlapRuns* pair,
                       const std::string& if_failed);

  // The flags of a run that trains `replicas` model replicas (each reads 8 / replicas examples).
  std::vector<std::string> Flags(int replicas) const;
  // A run of `st` on `ranks` ranks: those flags, then `build` (a prebuilt binary's own), the
  // stage's own (StageGrading::RunFlags), then `extra` (later flags win). The grader's reference
  // runs of a stage take the same, so that they run the layout the student's run did.
  std::vector<std::string> StageFlags(const stages::Row& st, const StageGrading& grading, int ranks,
                                      const std::vector<std::string>& build, const std::vector<std::string>& extra) const;

  // A run named `name`: the grader's own (its binaries, in work/grader), or the student's (built
  // in the kit or prebuilt: started by the grader's launcher with --no_spawn; jailed when
  // confined, in a fresh folder in work/student).
  StageRunOptions RunOptions(const std::string& name, const BuildOutcome* student_build);

  // What the grader's runs could not do (a known mistake that failed to run, a reference run
  // that failed): every one, once, for the report's notes.
  const std::vector<std::string>& notes() const { return notes_; }
  void Progress(const std::string& line) const {
    if (config_.progress) config_.progress(line);
  }

 private:
  void Note(const std::string& note);
  const std::string& GradedLauncher();
  std::string GraderBinary(const std::string& configured, const std::string& runfile) const;
  // A binary the grading cannot go on without: its absence is the grader's failure, named.
  std::string RequiredGraderBinary(const std::string& configured, const std::string& runfile,
                                   const std::string& what) const;
  // The ViT's CIFAR-10-format set, written into a folder student code may read and not change
  // (StudentSpace::SharedFolder): 8 images per class, enough that no run of 5 updates of 8 ends
  // an epoch.
  void PrepareData();
  // Part 1's reference on one process with the flags of a run of `replicas` replicas (a replica's
  // batch), then `extra`.
  StageRun SingleNodeRun(const std::string& name, const std::vector<std::string>& extra, int replicas = 1);
  // `configured`: a path given in the config ("": the runfile `runfile`); each run on `ranks`
  // ranks that make `replicas` model replicas (stages::Row::RunRanks, Replicas).
  const std::vector<KnownMistake>& RunMistakes(const std::vector<std::string>& names, bool* tried,
                                               std::vector<KnownMistake>* out, const std::string& configured,
                                               const std::string& runfile, int ranks, int replicas);

  const GraderConfig& config_;
  StudentSpace* space_ = nullptr;
  uint64_t seed_ = 0;
  std::string data_dir_;         // the ViT's images (model_type "vit")
  std::string graded_launcher_;  // GradedLauncher()'s, once made in this grading's space
  bool have_expected_ = false;
  SingleNode expected_;
  std::map<int, SingleNode> mean_of_shards_;  // by ranks
  bool mistakes_tried_ = false;
  std::vector<KnownMistake> mistakes_;
  std::map<std::string, bool> own_mistakes_tried_;  // by stage id
  std::map<std::string, std::vector<KnownMistake>> own_mistakes_;
  std::map<std::string, ReferenceFigures> reference_runs_;  // by stage, ranks and flags
  int reference_run_count_ = 0;                              // each run's folder a name of its own
  std::map<std::string, OverlapRuns> overlap_runs_;         // the same
  int overlap_run_count_ = 0;                                // each run's folder a name of its own
  LongSingle long_single_;
  std::map<int, ShareFigures> long_data_parallel_;
  std::vector<std::string> notes_;
};

}  // namespace distlm::grading
