#include "task3/ddp_stage.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "common/dist/counting_process_group.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/train/distributed.h"
#include "task3/ddp_flags.h"

namespace distlm::task3 {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// The parameter --embedding_sync=rows takes out of the DDP (HuggingFace's name for BERT's).
constexpr char kWordEmbeddingSuffix[] = "word_embeddings.weight";

dist::CountingProcessGroup& Counting(const train::StageContext& ctx) { return train::CountingGroup(ctx.dist()); }

// When the update's all-reduces ran, against its backward: the log line's overlap fields.
struct OverlapFigures {
  double busy_ms = 0;      // some all-reduce in flight
  double hidden_ms = 0;    // of which before backward ended
  double backward_ms = 0;  // the synchronised backward, start to end
  int64_t buckets = 0;     // all-reduces launched
  int64_t started_before_backward_end = 0;
  int64_t no_sync_calls = 0;  // collectives during the no_sync backward passes

  nlohmann::json ToJson() const {
    return {{"comm_busy_ms", busy_ms},
            {"comm_hidden_ms", hidden_ms},
            {"comm_exposed_ms", busy_ms - hidden_ms},
            {"backward_overlap_ms", backward_ms},
            {"buckets", buckets},
            {"buckets_started_before_backward_end", started_before_backward_end},
            {"no_sync_calls", no_sync_calls}};
  }
};

// What the DDP is handed, in order (rank 0): the grader derives the bucket layout it expects
// from it, and a student can check their own buckets by hand.
void WriteParameters(const train::StageContext& ctx, const std::vector<NamedParameter>& params) {
  if (!ctx.is_main_rank()) return;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : params) list.push_back({{"name", p.name}, {"numel", p.tensor.numel()}});
  WriteFileAtomically(ctx.output_dir() + "/ddp_parameters.json", list.dump(1) + "\n");
}

// The union of the all-reduces' [launch, completion] intervals, split at backward's end. An
// all-reduce whose completion is unknown counts until FinishGradientSync returned.
OverlapFigures Overlap(const dist::CommStats& stats, Clock::time_point sync_start, Clock::time_point backward_end,
                       Clock::time_point finish_end) {
  OverlapFigures f;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> spans;
  for (const auto& r : stats.records) {
    if (r.op != "allreduce") continue;
    ++f.buckets;
    if (r.launched < backward_end) ++f.started_before_backward_end;
    const int64_t done = r.completed_ns->load();
    Clock::time_point end = done > 0 ? Clock::time_point(Clock::duration(done)) : finish_end;
    spans.emplace_back(r.launched, std::max(r.launched, std::min(end, finish_end)));
  }
  std::sort(spans.begin(), spans.end());
  Clock::time_point covered = Clock::time_point::min();
  for (const auto& [a, b] : spans) {
    const Clock::time_point from = std::max(a, covered);
    if (b <= from) continue;
    f.busy_ms += Ms(b - from);
    if (from < backward_end) f.hidden_ms += Ms(std::min(b, backward_end) - from);
    covered = b;
  }
  f.backward_ms = Ms(backward_end - sync_start);
  return f;
}

}  // namespace

DdpStage::DdpStage(std::string name, train::TrainStep step) : Stage(std::move(name), std::move(step)) {}

DdpStage::~DdpStage() = default;

train::DistInfo DdpStage::Connect() {
  comm_dtype_ = train::CommDtypeFromFlags();
  return train::InitDistributedFromFlags(comm_dtype_);
}

void DdpStage::BeforeTraining(const train::StageContext& ctx) {
  train::RecordCommDtype(ctx, comm_dtype_);
  const DdpFlags flags = DdpFlagsFromCommandLine();
  std::vector<NamedParameter> params;
  for (const auto& [name, tensor] : ctx.named_parameters()) {
    if (flags.embedding_rows && !embedding_rows_ && absl::EndsWith(name, kWordEmbeddingSuffix)) {
      embedding_rows_ = std::make_unique<EmbeddingRowSync>(name, tensor, ctx.dist().pg);
      continue;
    }
    params.push_back({name, tensor});
  }
  if (flags.embedding_rows && !embedding_rows_) {
    throw UserError("--embedding_sync=rows: the model has no parameter named *" + std::string(kWordEmbeddingSuffix) +
                    " (a BERT's word embedding); use --embedding_sync=dense");
  }
  if (flags.unused_parameter) {
    // Registered last, as a head added after the model would be: its gradient would come first.
    params.push_back({kUnusedParameterName, torch::zeros({16}, torch::requires_grad())});
  }
  WriteParameters(ctx, params);
  std::string what = "per-parameter DDP (3a)";
  if (flags.kind == "buckets") {
    ddp_ = MakeBucketedDdp(std::move(params), ctx.dist().pg, static_cast<int64_t>(flags.bucket_cap_mb * (1 << 20)));
    char buf[96];
    std::snprintf(buf, sizeof(buf), "bucketed DDP (3b), cap %.3g MiB", flags.bucket_cap_mb);
    what = buf;
  } else {
    ddp_ = MakePerParameterDdp(std::move(params), ctx.dist().pg);
  }
  if (!ddp_) {
    throw UserError(name() + ": Make" + std::string(flags.kind == "buckets" ? "Bucketed" : "PerParameter") +
                    "Ddp returned nothing");
  }
  if (ctx.is_main_rank()) {
    std::printf("%s: your %s over %d rank(s) (%s)\n", name().c_str(), what.c_str(), ctx.dist().world_size,
                ctx.dist().backend.c_str());
    if (embedding_rows_) {
      std::printf("%s: %s averaged by rows after your DDP (--embedding_sync=rows)\n", name().c_str(),
                  embedding_rows_->name().c_str());
    }
    std::fflush(stdout);
  }
}

void DdpStage::BeforeBackward(const train::StageContext& ctx, bool will_sync) {
  if (!ddp_) throw UserError(name() + ": the DDP was not built before training");
  if (!in_update_) {
    Counting(ctx).TakeStats();  // drop what came before (loss averaging, evaluation, the broadcast)
    in_update_ = true;
  }
  if (will_sync) {
    no_sync_calls_ = Counting(ctx).TakeStats().calls();
    sync_start_ = Clock::now();
  }
  ddp_->set_require_grad_sync(will_sync);
  // --comm_dtype: only the all-reduces of the synchronised backward are cast.
  train::SetGradientCompression(ctx.dist(), will_sync);
}

void DdpStage::WriteLayout(const train::StageContext& ctx, const dist::CommStats& stats) {
  layout_written_ = true;
  if (!ctx.is_main_rank()) return;
  nlohmann::json layout = nlohmann::json::array();
  std::string line;
  for (const auto& r : stats.records) {
    if (r.op != "allreduce") continue;
    layout.push_back({{"bucket", layout.size()}, {"numel", r.numel()}, {"bytes", r.bytes}, {"dtype", r.dtype}});
    if (layout.size() <= 8) line += (layout.size() > 1 ? ", " : "") + std::to_string(r.bytes);
  }
  if (layout.size() > 8) line += ", ...";
  std::printf("%s: %zu all-reduce(s) per update, in launch order (bytes): %s\n", name().c_str(), layout.size(),
              line.c_str());
  std::fflush(stdout);
  WriteFileAtomically(ctx.output_dir() + "/ddp_buckets.json", layout.dump(1) + "\n");
}

void DdpStage::SyncGradients(const train::StageContext& ctx) {
  const Clock::time_point backward_end = Clock::now();
  in_update_ = false;
  int64_t embedding_rows_sent = -1;
  try {
    ddp_->FinishGradientSync();
    if (embedding_rows_) embedding_rows_sent = embedding_rows_->Sync();
  } catch (...) {
    train::SetGradientCompression(ctx.dist(), false);
    throw;
  }
  const Clock::time_point finish_end = Clock::now();
  train::SetGradientCompression(ctx.dist(), false);
  dist::CommStats stats = Counting(ctx).TakeStats();
  OverlapFigures overlap = Overlap(stats, sync_start_, backward_end, finish_end);
  overlap.no_sync_calls = no_sync_calls_;
  figures_ = {};
  figures_.fields = overlap.ToJson();
  if (embedding_rows_sent >= 0) figures_.fields["embedding_rows_sent"] = embedding_rows_sent;
  figures_.comm_time_ms = Ms(finish_end - backward_end);
  if (!layout_written_) WriteLayout(ctx, stats);
  figures_.comm = std::move(stats);
}

train::UpdateFigures DdpStage::TakeFigures() { return std::exchange(figures_, {}); }

std::unique_ptr<train::Stage> MakeDdpStage(std::string name, train::TrainStep step) {
  return std::make_unique<DdpStage>(std::move(name), std::move(step));
}

}  // namespace distlm::task3
