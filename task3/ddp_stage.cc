#include "task3/ddp_stage.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "common/dist/counting_process_group.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/train/distributed.h"
#include "task3/ddp.h"

ABSL_FLAG(std::string, ddp, "buckets",
          "task3: which of your DistributedDataParallel versions trains: buckets (3b) or per_parameter (3a)");
ABSL_FLAG(double, bucket_cap_mb, 25, "task3: the bucket size cap of --ddp=buckets, in MiB (PyTorch's bucket_cap_mb)");
ABSL_FLAG(bool, ddp_unused_parameter, false,
          "task3: also hand your DDP a parameter that takes no part in the loss (named "
          "'unused_by_the_loss.weight'); your FinishGradientSync must then fail naming it. For the "
          "local tests and the grader: a run with it exits with that error");

namespace distlm::task3 {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct StageState {
  std::string stage;
  std::unique_ptr<DataParallel> ddp;
  bool in_update = false;         // a backward of the current update has been seen
  Clock::time_point sync_start;   // the update's synchronised backward began
  int64_t no_sync_calls = 0;      // collectives during the update's no_sync backward passes
  bool layout_written = false;
  nlohmann::json last;            // the current update's log fields
};

dist::CountingProcessGroup& Counting(train::Trainer& t) { return train::CountingGroup(t.dist()); }

// What the DDP is handed, in order (rank 0): the grader derives the bucket layout it expects
// from it, and a student can check their own buckets by hand.
void WriteParameters(train::Trainer& t, const std::vector<NamedParameter>& params) {
  if (!t.is_main_rank()) return;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : params) {
    list.push_back({{"name", p.name}, {"numel", p.tensor.numel()}});
  }
  WriteFileAtomically(t.output_dir() + "/ddp_parameters.json", list.dump(1) + "\n");
}

void BeforeTraining(StageState& s, train::Trainer& t) {
  const std::string kind = absl::GetFlag(FLAGS_ddp);
  const double mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  std::vector<NamedParameter> params;
  for (const auto& p : t.model()->named_parameters()) params.push_back({p.key(), p.value()});
  if (absl::GetFlag(FLAGS_ddp_unused_parameter)) {
    // Registered last, as a head added after the model would be: its gradient would come first.
    params.push_back({kUnusedParameterName, torch::zeros({16}, torch::requires_grad())});
  }
  WriteParameters(t, params);
  std::string what;
  if (kind == "buckets") {
    if (!(mb > 0) || mb > 1e6) {
      throw UserError("--bucket_cap_mb=" + std::to_string(mb) + " must be a positive size in MiB");
    }
    s.ddp = MakeBucketedDdp(std::move(params), t.dist().pg, static_cast<int64_t>(mb * (1 << 20)));
    char buf[96];
    std::snprintf(buf, sizeof(buf), "bucketed DDP (3b), cap %.3g MiB", mb);
    what = buf;
  } else if (kind == "per_parameter") {
    s.ddp = MakePerParameterDdp(std::move(params), t.dist().pg);
    what = "per-parameter DDP (3a)";
  } else {
    throw UserError("--ddp=" + kind + " is not a DDP version: use buckets (3b) or per_parameter (3a)");
  }
  if (!s.ddp) throw UserError(s.stage + ": Make" + std::string(kind == "buckets" ? "Bucketed" : "PerParameter") +
                              "Ddp returned nothing");
  if (t.is_main_rank()) {
    std::printf("%s: your %s over %d rank(s) (%s)\n", s.stage.c_str(), what.c_str(), t.dist().world_size,
                t.dist().backend.c_str());
    std::fflush(stdout);
  }
}

void BeforeBackward(StageState& s, train::Trainer& t, bool will_sync) {
  if (!s.ddp) throw UserError(s.stage + ": the DDP was not built before training");
  if (!s.in_update) {
    Counting(t).TakeStats();  // drop what came before (loss averaging, evaluation, the broadcast)
    s.in_update = true;
  }
  if (will_sync) {
    s.no_sync_calls = Counting(t).TakeStats().calls();
    s.sync_start = Clock::now();
  }
  s.ddp->set_require_grad_sync(will_sync);
  // --comm_dtype: only the all-reduces of the synchronised backward are cast.
  train::SetGradientCompression(t.dist(), will_sync);
}

// The union of the all-reduces' [launch, completion] intervals, split at backward's end. An
// all-reduce whose completion is unknown counts until FinishGradientSync returned.
nlohmann::json OverlapJson(const dist::CommStats& stats, Clock::time_point sync_start, Clock::time_point backward_end,
                           Clock::time_point finish_end) {
  std::vector<std::pair<Clock::time_point, Clock::time_point>> spans;
  int64_t allreduces = 0, before_end = 0;
  for (const auto& r : stats.records) {
    if (r.op != "allreduce") continue;
    ++allreduces;
    if (r.launched < backward_end) ++before_end;
    const int64_t done = r.completed_ns->load();
    Clock::time_point end = done > 0 ? Clock::time_point(Clock::duration(done)) : finish_end;
    spans.emplace_back(r.launched, std::max(r.launched, std::min(end, finish_end)));
  }
  std::sort(spans.begin(), spans.end());
  double busy = 0, hidden = 0;
  Clock::time_point covered = Clock::time_point::min();
  for (const auto& [a, b] : spans) {
    const Clock::time_point from = std::max(a, covered);
    if (b <= from) continue;
    busy += Ms(b - from);
    if (from < backward_end) hidden += Ms(std::min(b, backward_end) - from);
    covered = b;
  }
  return {{"comm_busy_ms", busy},
          {"comm_hidden_ms", hidden},
          {"comm_exposed_ms", busy - hidden},
          {"backward_overlap_ms", Ms(backward_end - sync_start)},
          {"buckets", allreduces},
          {"buckets_started_before_backward_end", before_end}};
}

void WriteLayout(StageState& s, train::Trainer& t, const dist::CommStats& stats) {
  s.layout_written = true;
  if (!t.is_main_rank()) return;
  nlohmann::json layout = nlohmann::json::array();
  std::string line;
  for (const auto& r : stats.records) {
    if (r.op != "allreduce") continue;
    layout.push_back({{"bucket", layout.size()}, {"numel", r.numel()}, {"bytes", r.bytes}, {"dtype", r.dtype}});
    if (layout.size() <= 8) line += (layout.size() > 1 ? ", " : "") + std::to_string(r.bytes);
  }
  if (layout.size() > 8) line += ", ...";
  std::printf("%s: %zu all-reduce(s) per update, in launch order (bytes): %s\n", s.stage.c_str(), layout.size(),
              line.c_str());
  std::fflush(stdout);
  WriteFileAtomically(t.output_dir() + "/ddp_buckets.json", layout.dump(1) + "\n");
}

void SyncGradients(StageState& s, train::Trainer& t) {
  const Clock::time_point backward_end = Clock::now();
  s.in_update = false;
  try {
    s.ddp->FinishGradientSync();
  } catch (...) {
    train::SetGradientCompression(t.dist(), false);
    throw;
  }
  const Clock::time_point finish_end = Clock::now();
  train::SetGradientCompression(t.dist(), false);
  dist::CommStats stats = Counting(t).TakeStats();
  s.last = stats.ToJson();
  s.last["comm_time_ms"] = Ms(finish_end - backward_end);
  s.last["no_sync_calls"] = s.no_sync_calls;
  s.last.update(OverlapJson(stats, s.sync_start, backward_end, finish_end));
  if (!s.layout_written) WriteLayout(s, t, stats);
}

}  // namespace

train::StageHooks DdpStageHooks(const std::string& stage) {
  auto s = std::make_shared<StageState>();
  s->stage = stage;
  train::StageHooks hooks;
  hooks.stage = stage;
  hooks.before_training = [s](train::Trainer& t) { BeforeTraining(*s, t); };
  hooks.before_backward = [s](train::Trainer& t, bool will_sync) { BeforeBackward(*s, t, will_sync); };
  hooks.sync_gradients = [s](train::Trainer& t) { SyncGradients(*s, t); };
  hooks.update_log_extras = [s](train::Trainer&) { return s->last; };
  return hooks;
}

int RunDdpStage(int argc, char** argv, train::StageHooks hooks) {
  auto comm_dtype = std::make_shared<at::ScalarType>(at::kFloat);
  auto before = hooks.before_training;
  hooks.before_training = [before, comm_dtype](train::Trainer& t) {
    train::RecordCommDtype(t, *comm_dtype);
    before(t);
  };
  return train::RunGlueMain(argc, argv, hooks, [comm_dtype]() {
    *comm_dtype = train::CommDtypeFromFlags();
    return train::InitDistributedFromFlags(*comm_dtype);
  });
}

}  // namespace distlm::task3
