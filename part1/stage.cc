#include "part1/stage.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "common/runtime/errors.h"

ABSL_FLAG(std::string, data_shard, "",
          "part1: R/N trains on the share of the training set that data-parallel rank R of N reads "
          "(task 8's workers, one at a time); empty: all of it");

namespace distlm::part1 {
namespace {

// "R/N" with 0 <= R < N, or a UserError naming the flag.
train::Stage::DataShare ParseDataShard(const std::string& text) {
  const size_t slash = text.find('/');
  auto number = [&](const std::string& s, long* out) {
    char* end = nullptr;
    *out = std::strtol(s.c_str(), &end, 10);
    return !s.empty() && end != nullptr && *end == '\0';
  };
  long r = -1, n = 0;
  if (slash == std::string::npos || !number(text.substr(0, slash), &r) || !number(text.substr(slash + 1), &n) ||
      n < 1 || n > 1 << 20 || r < 0 || r >= n) {
    throw UserError("--data_shard=" + text + ": expected R/N with 0 <= R < N, for example 1/4");
  }
  return {static_cast<int>(n), static_cast<int>(r)};
}

class SingleProcessStage : public train::Stage {
 public:
  using Stage::Stage;
  train::DistInfo Connect() override {
    const std::string shard = absl::GetFlag(FLAGS_data_shard);
    if (!shard.empty()) {
      share_ = ParseDataShard(shard);
      std::printf("part1: --data_shard=%s: training on the share that data-parallel rank %d of %d reads\n",
                  shard.c_str(), share_.replica, share_.replicas);
    }
    return ConnectOneProcess("; use task2a, task2b or task3 for several ranks");
  }
  DataShare data_share(const train::DistInfo&) const override { return share_; }

 private:
  DataShare share_;
};

}  // namespace

std::unique_ptr<train::Stage> MakeStage(train::TrainStep step) {
  return std::make_unique<SingleProcessStage>("part1", std::move(step));
}

}  // namespace distlm::part1
