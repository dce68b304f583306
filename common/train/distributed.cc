#include "common/train/distributed.h"

#include <chrono>
#include <memory>

#include "common/dist/counting_process_group.h"
#include "common/dist/dist.h"
#include "common/dist/dist_flags.h"
#include "common/runtime/errors.h"

namespace distlm::train {

DistInfo InitDistributedFromFlags() {
  auto ctx = std::make_shared<dist::DistContext>(dist::InitDistributed(dist::DistConfigFromFlagsAndEnv()));
  DistInfo info;
  info.pg = c10::make_intrusive<dist::CountingProcessGroup>(ctx->pg);
  info.rank = ctx->rank;
  info.world_size = ctx->world_size;
  info.backend = ctx->backend_name;
  info.check_agreement = [ctx](const std::string& what, const std::string& value) {
    dist::CheckAgreement(*ctx, what, value);
  };
  info.describe_failure = [ctx](const std::exception& e) -> std::string {
    return dist::LostRankError(*ctx, e).what();
  };
  info.keep_alive = ctx;
  return info;
}

DistInfo SingleProcessFromFlags(const std::string& stage) {
  dist::DistConfig config = dist::DistConfigFromFlagsAndEnv();
  if (config.world_size != 1) {
    throw UserError(stage + " trains on one process, but " + config.world_size_origin +
                    "; use task2a, task2b or task3 for several ranks");
  }
  return DistInfo{};
}

int RunGradientSyncStage(int argc, char** argv, const std::string& stage, GradientSyncFn sync) {
  StageHooks hooks;
  hooks.stage = stage;
  auto last = std::make_shared<nlohmann::json>();
  hooks.sync_gradients = [sync, last](Trainer& t) {
    auto* counting = static_cast<dist::CountingProcessGroup*>(t.dist().pg.get());
    counting->TakeStats();  // drop what came before (loss averaging, evaluation)
    auto start = std::chrono::steady_clock::now();
    sync(*t.dist().pg, t.parameters());
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    *last = counting->TakeStats().ToJson();
    (*last)["comm_time_ms"] = ms;
  };
  hooks.update_log_extras = [last](Trainer&) { return *last; };
  return RunGlueMain(argc, argv, hooks, InitDistributedFromFlags);
}

}  // namespace distlm::train
