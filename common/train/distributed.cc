#include "common/train/distributed.h"

#include <utility>

#include <chrono>
#include <memory>

#include "absl/flags/flag.h"
#include "common/dist/casting_process_group.h"
#include "common/dist/dist.h"
#include "common/dist/dist_flags.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"

ABSL_FLAG(std::string, comm_dtype, "fp32",
          "all-reduce the gradients in this dtype (fp32, fp16, bf16) and cast the result back to float32, as "
          "PyTorch DDP's fp16_compress_hook does; fp16 and bf16 send half the bytes (bf16 needs --backend=mpi). "
          "Stages that all-reduce their gradients take it (tasks 2b and 3); the others refuse anything but fp32");

namespace distlm::train {

at::ScalarType CommDtypeFromFlags() { return dist::ParseCommDtype(absl::GetFlag(FLAGS_comm_dtype)); }

DistInfo InitDistributedFloat32Only(const std::string& stage, const std::string& why) {
  // The binary links --comm_dtype with the other stages' flags; refuse it rather than ignore it.
  const at::ScalarType comm_dtype = CommDtypeFromFlags();
  if (comm_dtype != at::kFloat) {
    throw UserError("--comm_dtype=" + dist::CommDtypeName(comm_dtype) + " is not supported by " + stage + ": " + why +
                    " (--comm_dtype applies to task2b and task3)");
  }
  return InitDistributedFromFlags();
}

DistInfo InitDistributedFromFlags(at::ScalarType comm_dtype) {
  dist::DistConfig config = dist::DistConfigFromFlagsAndEnv();
  if (comm_dtype == at::kBFloat16 && config.backend == "gloo" && !dist::kGlooHasBfloat16) {
    // Checked before the rendezvous: every rank fails at once, with the same line.
    throw UserError("--comm_dtype=bf16 needs --backend=mpi: Gloo in this LibTorch (1.13) cannot all-reduce "
                    "bfloat16; use --backend=mpi or --comm_dtype=fp16");
  }
  auto ctx = std::make_shared<dist::DistContext>(dist::InitDistributed(config));
  DistInfo info;
  info.pg = dist::AsGroup(c10::make_intrusive<dist::CountingProcessGroup>(ctx->pg), ctx->backend_name);
  if (comm_dtype != at::kFloat) {
    info.pg = dist::AsGroup(c10::make_intrusive<dist::CastingProcessGroup>(info.pg, comm_dtype),
                            ctx->backend_name);
  }
  info.rank = ctx->rank;
  info.world_size = ctx->world_size;
  info.local_rank = ctx->config.local_rank;
  info.backend = ctx->backend_name;
  info.described = dist::DescribeDistConfig(ctx->config);
  info.check_agreement = [ctx](const std::string& what, const std::string& value) {
    dist::CheckAgreement(*ctx, what, value);
  };
  info.describe_failure = [ctx](const std::exception& e) -> std::string {
    return dist::LostRankError(*ctx, e).what();
  };
  info.new_subgroup = [ctx](const std::vector<std::vector<int>>& parts, const std::string& tag) {
    return dist::AsGroup(c10::make_intrusive<dist::CountingProcessGroup>(dist::NewSubgroup(*ctx, parts, tag)),
                         ctx->backend_name);
  };
  info.keep_alive = ctx;
  return info;
}

dist::DistContext& DistContextOf(const DistInfo& info) {
  if (!info.keep_alive) throw std::logic_error("DistContextOf: no process group behind this DistInfo");
  return *std::static_pointer_cast<dist::DistContext>(info.keep_alive);
}

c10::intrusive_ptr<c10d::ProcessGroup> Counted(c10::intrusive_ptr<c10d::ProcessGroup> pg) {
  const std::string backend = pg->getBackendName();
  return dist::AsGroup(c10::make_intrusive<dist::CountingProcessGroup>(std::move(pg)), backend);
}

dist::CountingProcessGroup& CountingGroup(const DistInfo& info) {
  dist::GroupPtr pg = info.pg;
  if (auto* casting = dist::ImplOf<dist::CastingProcessGroup>(pg)) pg = casting->inner();
  auto* counting = dist::ImplOf<dist::CountingProcessGroup>(pg);
  if (counting == nullptr) throw std::logic_error("CountingGroup: the process group does not count");
  return *counting;
}

void SetGradientCompression(const DistInfo& info, bool enabled) {
  if (auto* casting = dist::ImplOf<dist::CastingProcessGroup>(info.pg)) casting->set_enabled(enabled);
}

void RecordCommDtype(const StageContext& ctx, at::ScalarType comm_dtype) {
  if (!ctx.is_main_rank()) return;
  const std::string path = ctx.output_dir() + "/training_args.json";
  nlohmann::json args = nlohmann::json::parse(ReadFile(path));
  args["comm_dtype"] = dist::CommDtypeName(comm_dtype);
  WriteFileAtomically(path, args.dump(2) + "\n");
}

}  // namespace distlm::train
