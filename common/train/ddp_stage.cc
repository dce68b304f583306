#include "common/train/ddp_stage.h"

#include <cstdio>

#include "absl/flags/flag.h"
#include "common/dist/counting_process_group.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/train/distributed.h"

ABSL_FLAG(double, bucket_cap_mb, 25,
          "task3: DistributedDataParallel's bucket size cap in MiB (the first bucket's cap stays 1 MiB, or this "
          "if smaller)");

namespace distlm::train {

nlohmann::json BucketLayoutJson(const ddp::DistributedDataParallel& ddp) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t b = 0; b < ddp.buckets().size(); ++b) {
    const ddp::BucketInfo& info = ddp.buckets()[b];
    out.push_back({{"bucket", b},
                   {"tensors", info.names.size()},
                   {"numel", info.numel},
                   {"bytes", info.bytes},
                   {"cap_bytes", info.cap},
                   {"dtype", info.dtype},
                   {"names", info.names}});
  }
  return out;
}

nlohmann::json SyncStatsJson(const ddp::SyncStats& st) {
  return {{"comm_time_ms", st.wait_ms},
          {"comm_busy_ms", st.comm_busy_ms()},
          {"comm_hidden_ms", st.comm_hidden_ms()},
          {"comm_exposed_ms", st.comm_exposed_ms()},
          {"backward_overlap_ms", st.backward_ms()},
          {"buckets", st.buckets()},
          {"buckets_started_before_backward_end", st.buckets_started_before_backward_end()}};
}

namespace {

ddp::DdpOptions OptionsFromFlags() {
  const double mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  if (!(mb > 0) || mb > 1e6) {
    throw UserError("--bucket_cap_mb=" + std::to_string(mb) + " must be a positive size in MiB");
  }
  ddp::DdpOptions options;
  options.bucket_cap_bytes = static_cast<int64_t>(mb * (1 << 20));
  options.first_bucket_cap_bytes = std::min(options.first_bucket_cap_bytes, options.bucket_cap_bytes);
  return options;
}

// What the hooks share; lives as long as the Trainer's hooks.
struct DdpStageState {
  std::string stage;
  WrapModelFn wrap;
  ddp::DdpOptions options;
  std::unique_ptr<ddp::DistributedDataParallel> ddp;
  bool in_update = false;        // a mini-batch of the current update has been seen
  int64_t synced_at_update = 0;  // ddp->synced_backwards() after the previous update
  nlohmann::json last;           // the current update's log fields
};

dist::CountingProcessGroup& Counting(Trainer& t) { return CountingGroup(t.dist()); }

void BeforeTraining(DdpStageState& s, Trainer& t) {
  auto model = std::static_pointer_cast<torch::nn::Module>(t.model().ptr());
  s.ddp = s.wrap(model, t.dist().pg, s.options);
  if (!s.ddp) throw UserError(s.stage + ": WrapModel returned no DistributedDataParallel");
  if (s.ddp->module_ptr() != model) {
    throw UserError(s.stage + ": WrapModel wrapped another module, not the model it was given");
  }
  if (&s.ddp->process_group() != t.dist().pg.get()) {
    throw UserError(s.stage + ": WrapModel used another process group, not the one it was given");
  }
  s.synced_at_update = s.ddp->synced_backwards();
  if (t.is_main_rank()) {
    std::printf("%s: DistributedDataParallel over %d rank(s) (%s), %zu bucket(s), first cap %.3g MiB, cap %.3g MiB\n%s",
                s.stage.c_str(), t.dist().world_size, t.dist().backend.c_str(), s.ddp->buckets().size(),
                static_cast<double>(s.options.first_bucket_cap_bytes) / (1 << 20),
                static_cast<double>(s.options.bucket_cap_bytes) / (1 << 20), s.ddp->DescribeBuckets().c_str());
    std::fflush(stdout);
    WriteFileAtomically(t.output_dir() + "/ddp_buckets.json", BucketLayoutJson(*s.ddp).dump(1) + "\n");
  }
}

void BeforeBackward(DdpStageState& s, Trainer& t, bool will_sync) {
  if (!s.ddp) throw UserError(s.stage + ": the model was not wrapped before training");
  if (!s.in_update) {
    Counting(t).TakeStats();  // drop what came before (loss averaging, evaluation, the broadcast)
    s.in_update = true;
  }
  s.ddp->set_require_backward_grad_sync(will_sync);
  // --comm_dtype: the buckets' all-reduces run inside backward; only they are cast.
  SetGradientCompression(t.dist(), will_sync);
}

void SyncGradients(DdpStageState& s, Trainer& t) {
  SetGradientCompression(t.dist(), false);
  s.in_update = false;
  const int64_t synced = s.ddp->synced_backwards() - s.synced_at_update;
  s.synced_at_update = s.ddp->synced_backwards();
  if (synced != 1) {
    throw UserError(s.stage + ": expected one synchronised backward pass in this update, DistributedDataParallel saw " +
                    std::to_string(synced));
  }
  s.last = Counting(t).TakeStats().ToJson();
  s.last.update(SyncStatsJson(s.ddp->last_sync()));
}

}  // namespace

int RunDdpStage(int argc, char** argv, const std::string& stage, WrapModelFn wrap) {
  auto s = std::make_shared<DdpStageState>();
  s->stage = stage;
  s->wrap = std::move(wrap);
  StageHooks hooks;
  hooks.stage = stage;
  auto comm_dtype = std::make_shared<at::ScalarType>(at::kFloat);
  hooks.before_training = [s, comm_dtype](Trainer& t) {
    s->options = OptionsFromFlags();
    RecordCommDtype(t, *comm_dtype);
    BeforeTraining(*s, t);
  };
  hooks.before_backward = [s](Trainer& t, bool will_sync) { BeforeBackward(*s, t, will_sync); };
  hooks.sync_gradients = [s](Trainer& t) { SyncGradients(*s, t); };
  hooks.update_log_extras = [s](Trainer&) { return s->last; };
  return RunGlueMain(argc, argv, hooks, [comm_dtype]() {
    *comm_dtype = CommDtypeFromFlags();
    return InitDistributedFromFlags(*comm_dtype);
  });
}

}  // namespace distlm::train
