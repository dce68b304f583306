// Local tests with real ranks, for the students' tests: the test binary re-executes itself as
// N processes that meet over 127.0.0.1 (Gloo), each running one named case, and the parent
// turns what they report into one message a student can act on.
//
//   RANK_CASE(average) {                       // runs on every rank
//     ... env.rank, env.world, env.pg ...
//     if (wrong) Fail("parameter w: the sum, not the mean");
//   }
//   TEST(Task2b, Average) { EXPECT_RANKS_PASS("average", 4); }
//
// Link //common/testing:rank_test instead of gtest_main: its main() is the worker when the
// binary was started as a rank, GoogleTest otherwise. Bounded time: Gloo gives up after
// kCollectiveTimeoutS, the parent kills what is left a few seconds later, and a rank that never
// joined a collective the others wait in is named, with each rank's collective counts.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dist/c10d_compat.h"
#include "common/dist/counting_process_group.h"

namespace distlm::testing {

inline constexpr double kCollectiveTimeoutS = 20;

struct RankEnv {
  int rank = 0;
  int world = 1;
  dist::GroupPtr pg;                    // Gloo over 127.0.0.1; what passes through it is recorded:
  dist::CountingProcessGroup* counting;  // counting->TakeStats() gives the records since last time
  // The group of this rank's part of `parts`, a partition of the ranks (dist::NewSubgroup; every
  // rank calls it with the same parts and tag); not counted.
  std::function<dist::GroupPtr(const std::vector<std::vector<int>>& parts, const std::string& tag)> new_subgroup;
  c10::intrusive_ptr<c10d::Store> store;  // the rendezvous store every rank reaches
};

using RankBody = std::function<void(RankEnv&)>;

// Registers a case under `name` (RANK_CASE does it at start-up).
bool RegisterRankCase(const std::string& name, RankBody body);

// A check in a rank failed: the message reaches the parent as "rank R: <message>".
[[noreturn]] void Fail(const std::string& message);

// Parent side: runs the case on `world` ranks; "" when every rank passed, else what went wrong.
std::string RunRanks(const std::string& name, int world);

// Starts the worker or GoogleTest (rank_test's main calls it).
int RankTestMain(int argc, char** argv);

}  // namespace distlm::testing

#define RANK_CASE(name)                                                                        \
  static void RankCase_##name(::distlm::testing::RankEnv& env);                                \
  [[maybe_unused]] static const bool kRankCaseRegistered_##name =                              \
      ::distlm::testing::RegisterRankCase(#name, RankCase_##name);                             \
  static void RankCase_##name([[maybe_unused]] ::distlm::testing::RankEnv& env)

#define EXPECT_RANKS_PASS(name, world)                                                         \
  do {                                                                                         \
    const std::string rank_test_message = ::distlm::testing::RunRanks(name, world);            \
    EXPECT_TRUE(rank_test_message.empty()) << "[" << (name) << ", " << (world) << " ranks] "  \
                                           << rank_test_message;                               \
  } while (0)
