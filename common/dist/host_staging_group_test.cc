// HostStagingGroup over two real Gloo ranks (threads of this process, 127.0.0.1). On a machine
// without a GPU the tensors are host tensors too, so this checks the staging's bookkeeping
// (every result lands in the caller's tensor, in the right place, only after the work
// completes) against closed forms; the device-to-host copies themselves run on a GPU only.
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/types.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/dist/gloo_threads_testing.h"
#include "common/dist/host_staging_group.h"

namespace distlm::dist {
namespace {

constexpr int kWorld = 2;
constexpr int64_t kN = 1031;

// Rank r's tensor: (r + 1) * [0, 1, ..., kN-1].
at::Tensor Mine(int rank) { return torch::arange(kN, torch::kFloat) * (rank + 1); }

void RunRanks(const std::function<void(int, GroupImpl&)>& body) {
  RunGlooThreads(kWorld, [&](int r, c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo) {
    HostStagingGroup staging(gloo);
    body(r, staging);
  });
}

TEST(HostStagingGroupTest, AllreduceAndBroadcastLandInTheCallersTensors) {
  RunRanks([](int r, GroupImpl& g) {
    std::vector<at::Tensor> t = {Mine(r)};
    const void* where = t[0].data_ptr();
    g.allreduce(t, c10d::AllreduceOptions())->wait();
    EXPECT_EQ(t[0].data_ptr(), where) << "the result must be written into the caller's tensor";
    EXPECT_TRUE(torch::equal(t[0], Mine(0) * 3)) << "rank " << r << ": sum of 1x and 2x";
    std::vector<at::Tensor> b = {Mine(r)};
    c10d::BroadcastOptions from1;
    from1.rootRank = 1;
    g.broadcast(b, from1)->wait();
    EXPECT_TRUE(torch::equal(b[0], Mine(1))) << "rank " << r << ": rank 1's tensor";
  });
}

TEST(HostStagingGroupTest, AllgatherGatherAndScatterFillEachSlot) {
  RunRanks([](int r, GroupImpl& g) {
    std::vector<at::Tensor> in = {Mine(r)};
    std::vector<std::vector<at::Tensor>> out(1);
    for (int i = 0; i < kWorld; ++i) out[0].push_back(torch::full({kN}, -1.f));
    g.allgather(out, in, c10d::AllgatherOptions())->wait();
    for (int i = 0; i < kWorld; ++i) EXPECT_TRUE(torch::equal(out[0][i], Mine(i))) << "allgather slot " << i;

    std::vector<std::vector<at::Tensor>> gathered;
    if (r == 0) {
      gathered.emplace_back();
      for (int i = 0; i < kWorld; ++i) gathered[0].push_back(torch::full({kN}, -1.f));
    }
    std::vector<at::Tensor> mine = {Mine(r)};
    g.gather(gathered, mine, c10d::GatherOptions())->wait();
    if (r == 0) {
      for (int i = 0; i < kWorld; ++i) EXPECT_TRUE(torch::equal(gathered[0][i], Mine(i))) << "gather slot " << i;
    }

    std::vector<std::vector<at::Tensor>> pieces;
    if (r == 0) pieces.push_back({Mine(0) + 100, Mine(0) + 200});
    std::vector<at::Tensor> got = {torch::full({kN}, -1.f)};
    g.scatter(got, pieces, c10d::ScatterOptions())->wait();
    EXPECT_TRUE(torch::equal(got[0], Mine(0) + 100 * (r + 1))) << "rank " << r << ": its scattered piece";
  });
}

// Both ranks send before they receive (as a pipeline's stages do, activations one way and
// gradients the other): each received message lands in the caller's tensor, in place.
TEST(HostStagingGroupTest, SendAndRecvLandInTheCallersTensors) {
  RunRanks([](int r, GroupImpl& g) {
    const int other = 1 - r;
    std::vector<at::Tensor> out = {Mine(r) + 7}, in = {torch::full({kN}, -1.f)};
    const void* where = in[0].data_ptr();
    auto sent = g.send(out, other, /*tag=*/3);
    g.recv(in, other, /*tag=*/3)->wait();
    sent->wait();
    EXPECT_EQ(in[0].data_ptr(), where) << "the message must be written into the caller's tensor";
    EXPECT_TRUE(torch::equal(in[0], Mine(other) + 7)) << "rank " << r << ": rank " << other << "'s message";
  });
}

TEST(HostStagingGroupTest, TheFutureCompletesWithTheCallersTensorFilled) {
  RunRanks([](int r, GroupImpl& g) {
    std::vector<at::Tensor> t = {Mine(r)};
    auto work = g.allreduce(t, c10d::AllreduceOptions());
    at::Tensor seen;
    auto fut = work->getFuture()->then(
        [&](c10::ivalue::Future&) {
          seen = t[0].clone();  // what a DDP completion callback would read
          return c10::IValue();
        },
        c10::NoneType::get());
    fut->wait();
    EXPECT_TRUE(torch::equal(seen, Mine(0) * 3)) << "rank " << r;
  });
}

}  // namespace
}  // namespace distlm::dist
