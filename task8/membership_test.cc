// Task 8c's membership with real processes on loopback: rounds of the reference outer loop (DiLoCo's
// outer Nesterov step) among workers whose "inner training" is a move every process can compute,
// while one worker is killed mid-round and another starts later in its slot. Each worker prints
// its parameters after every round; the test replays the rounds in double precision, with the
// members each round had, and compares. Also: a joiner with another model, or slot 0, is
// refused with one line while the others train on; the store's host going ends the others with
// one line.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/dist/dist.h"
#include "common/runtime/errors.h"
#include "common/testing/subprocess.h"
#include "task8/membership.h"
#include "task8/outer_loop.h"

namespace distlm::task8 {
namespace {

constexpr int kElements = 6;
constexpr double kOuterLr = 0.7, kMomentum = 0.9;

// How far worker `slot` moves element j in round `round`: its pseudo-gradient.
double Move(int slot, int round, int j) { return 0.1 * std::sin(1.3 * slot + 0.7 * round + 0.1 * j); }

std::string Env(const char* name, const std::string& otherwise = "") {
  const char* v = std::getenv(name);
  return v ? v : otherwise;
}
int EnvInt(const char* name, int otherwise) { return std::stoi(Env(name, std::to_string(otherwise))); }

// ---- the worker ----

std::string PrintParams(const torch::Tensor& p) {
  std::string s;
  for (int j = 0; j < kElements; ++j) absl::StrAppend(&s, j ? " " : "", absl::StrFormat("%.9g", p[j].item<float>()));
  return s;
}

int Worker() {
  dist::DistConfig config;
  config.master_port = EnvInt("DISTLM_M_PORT", 0);
  config.world_size = EnvInt("DISTLM_M_WORLD", 3);
  config.rank = config.local_rank = EnvInt("DISTLM_M_SLOT", 0);
  config.timeout_s = 10;
  const int rounds = EnvInt("DISTLM_M_ROUNDS", 6);
  const int die_in = EnvInt("DISTLM_M_DIE_IN_ROUND", 0);
  const std::string fingerprint = Env("DISTLM_M_FINGERPRINT", "model=toy\nvocab=abc");
  const bool joiner = Env("DISTLM_M_ROLE") == "joiner";

  OuterOptimizerOptions options;
  options.lr = kOuterLr;
  options.momentum = kMomentum;
  std::unique_ptr<OuterLoop> outer = MakeOuterLoop(options);
  std::vector<torch::Tensor> params = {torch::zeros({kElements})};
  dist::DistContext ctx;
  std::unique_ptr<Membership> members;
  int round = 1;
  if (joiner) {
    ctx = dist::ConnectLate(config);
    // Started at once with the others, the test's joiner waits until its slot has left.
    const std::string wait_for = Env("DISTLM_M_JOIN_WHEN_GONE");
    while (!wait_for.empty()) {
      if (ctx.store->check({"distlm/task8/current"})) {
        const std::vector<uint8_t> b = ctx.store->get("distlm/task8/current");
        const std::string current(b.begin(), b.end());
        const std::string slots = current.substr(current.find(' ') + 1);
        std::vector<std::string> list = absl::StrSplit(slots, ',');
        if (std::find(list.begin(), list.end(), wait_for) == list.end()) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    members = Membership::Join(ctx, fingerprint, 60);
    std::vector<torch::Tensor> state;
    ShareTensors(*members->group(), state);
    // The others' parameters, the outer state, then the round they are at.
    params = {state[0]};
    outer->Begin(params);
    outer->LoadSharedState(std::vector<torch::Tensor>(state.begin() + 1, state.end() - 1));
    round = static_cast<int>(state.back().item<int64_t>());
    std::printf("slot %d joined generation %d before round %d\n", ctx.rank, members->generation(), round);
  } else {
    ctx = dist::InitDistributed(config);
    members = std::make_unique<Membership>(ctx);
    outer->Begin(params);
  }
  std::fflush(stdout);
  for (; round <= rounds; ++round) {
    // A round that takes a while, as training would: time for a joiner to come.
    std::this_thread::sleep_for(std::chrono::milliseconds(EnvInt("DISTLM_M_ROUND_MS", 300)));
    {
      torch::NoGradGuard no_grad;
      for (int j = 0; j < kElements; ++j) params[0][j] -= Move(ctx.rank, round, j);
    }
    if (round == die_in) kill(getpid(), SIGKILL);
    std::string contributors;
    for (;;) {
      std::vector<int> slots = members->slots();
      try {
        outer->End(*members->group(), params);
        contributors = absl::StrJoin(slots, ",");
        break;
      } catch (const UserError&) {
        throw;
      } catch (const std::exception& e) {
        const auto start = std::chrono::steady_clock::now();
        const std::vector<int> lost = members->Regroup();
        std::printf("round %d: lost slot(s) %s; generation %d trains on (regrouped in %.1f s)\n", round,
                    absl::StrJoin(lost, ",").c_str(), members->generation(),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
    }
    std::printf("round %d slots %s params %s\n", round, contributors.c_str(), PrintParams(params[0]).c_str());
    // A worker that reads the last round's decision late, as across a slow link.
    if (round == rounds) std::this_thread::sleep_for(std::chrono::milliseconds(EnvInt("DISTLM_M_LAST_ADMIT_LATE_MS", 0)));
    const std::vector<int> joined = members->Admit(fingerprint);
    if (!joined.empty()) {
      std::printf("round %d: slot(s) %s joined\n", round, absl::StrJoin(joined, ",").c_str());
      std::vector<torch::Tensor> state = {params[0].clone()};
      for (const auto& t : outer->SharedState()) state.push_back(t.clone());
      state.push_back(torch::tensor({static_cast<int64_t>(round + 1)}, torch::kLong));
      ShareTensors(*members->group(), state);
    }
    std::fflush(stdout);
  }
  members->Finish();
  return 0;
}

// ---- the test ----

std::vector<testing::ProcessResult> RunWorkers(const std::vector<std::map<std::string, std::string>>& workers,
                                               int world) {
  const std::string port = std::to_string(testing::FreePort());
  std::vector<testing::Command> commands;
  for (const auto& w : workers) {
    testing::Command c{{testing::SelfPath()}, w};
    c.env["DISTLM_M_PORT"] = port;
    c.env["DISTLM_M_WORLD"] = std::to_string(world);
    if (!c.env.count("DISTLM_M_ROLE")) c.env["DISTLM_M_ROLE"] = "founder";
    commands.push_back(c);
  }
  return testing::RunAll(commands, 150);
}

// What a worker printed after each round: the slots whose moves the round averaged, and the
// parameters.
struct Round {
  std::string slots;
  std::vector<double> params;
};
std::map<int, Round> Rounds(const std::string& output) {
  std::map<int, Round> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    int round = 0;
    char slots[64] = "";
    int consumed = 0;
    if (std::sscanf(line.c_str(), "round %d slots %63s params %n", &round, slots, &consumed) < 2 || consumed == 0) continue;
    Round r;
    r.slots = slots;
    std::istringstream values(line.substr(consumed));
    double v;
    while (values >> v) r.params.push_back(v);
    out[round] = r;
  }
  return out;
}

// The rounds replayed in double precision: each round's mean move over its slots, then
// torch.optim.SGD's Nesterov step (lr 0.7, momentum 0.9) from where the round started.
std::map<int, std::vector<double>> Replay(const std::map<int, Round>& rounds) {
  std::map<int, std::vector<double>> out;
  std::vector<double> start(kElements, 0.0), momentum;
  for (const auto& [round, r] : rounds) {
    std::vector<int> slots;
    for (absl::string_view s : absl::StrSplit(r.slots, ',')) slots.push_back(std::stoi(std::string(s)));
    std::vector<double> g(kElements, 0.0);
    for (int j = 0; j < kElements; ++j) {
      for (int s : slots) g[j] += Move(s, round, j) / static_cast<double>(slots.size());
    }
    if (momentum.empty()) {
      momentum = g;
    } else {
      for (int j = 0; j < kElements; ++j) momentum[j] = kMomentum * momentum[j] + g[j];
    }
    for (int j = 0; j < kElements; ++j) start[j] -= kOuterLr * (g[j] + kMomentum * momentum[j]);
    out[round] = start;
  }
  return out;
}

// Every process's rounds agree with each other's and with the replay; the union of the rounds.
std::map<int, Round> CheckRounds(const std::vector<testing::ProcessResult>& results) {
  std::map<int, Round> all;
  for (size_t w = 0; w < results.size(); ++w) {
    for (const auto& [round, r] : Rounds(results[w].output)) {
      auto [it, fresh] = all.try_emplace(round, r);
      if (fresh) continue;
      EXPECT_EQ(it->second.slots, r.slots) << "round " << round << ", worker " << w << " disagrees on who averaged";
      EXPECT_EQ(it->second.params, r.params) << "round " << round << ", worker " << w
                                             << " ends the round with other parameters";
    }
  }
  const auto replayed = Replay(all);
  for (const auto& [round, r] : all) {
    EXPECT_EQ(r.params.size(), static_cast<size_t>(kElements));
    for (size_t j = 0; j < r.params.size(); ++j) {
      EXPECT_NEAR(r.params[j], replayed.at(round)[j], 1e-6) << "round " << round << " element " << j;
    }
  }
  return all;
}

std::string Outputs(const std::vector<testing::ProcessResult>& results) {
  std::string s;
  for (size_t w = 0; w < results.size(); ++w) {
    absl::StrAppend(&s, "--- worker ", w, " (exit ", results[w].exit_code, results[w].timed_out ? ", timed out" : "",
                    "):\n", results[w].output);
  }
  return s;
}

TEST(MembershipTest, AWorkerKilledMidRoundIsLeftBehindAndAJoinerTakesItsSlotWithTheState) {
  const auto results = RunWorkers({{{"DISTLM_M_SLOT", "0"}, {"DISTLM_M_ROUNDS", "8"}},
                                   {{"DISTLM_M_SLOT", "1"}, {"DISTLM_M_ROUNDS", "8"}},
                                   {{"DISTLM_M_SLOT", "2"}, {"DISTLM_M_ROUNDS", "8"}, {"DISTLM_M_DIE_IN_ROUND", "3"}},
                                   {{"DISTLM_M_SLOT", "2"}, {"DISTLM_M_ROUNDS", "8"}, {"DISTLM_M_ROLE", "joiner"},
                                    {"DISTLM_M_JOIN_WHEN_GONE", "2"}}},
                                  3);
  const std::string all = Outputs(results);
  std::printf("%s", all.c_str());  // the run's log, for the reader of the test's output
  EXPECT_EQ(results[0].exit_code, 0) << all;
  EXPECT_EQ(results[1].exit_code, 0) << all;
  EXPECT_EQ(results[2].exit_code, 128 + SIGKILL) << all;
  EXPECT_EQ(results[3].exit_code, 0) << all;
  for (int w : {0, 1}) {
    const std::string said = "round 3: lost slot(s) 2; generation 1 trains on (regrouped in ";
    const size_t at = results[w].output.find(said);
    ASSERT_NE(at, std::string::npos) << all;
    // A dead worker is known by its stopped heartbeat (3 s); the joiner waiting for its slot
    // must not beat in its place, or the others wait out the whole deadline (20 s here).
    EXPECT_LT(std::stod(results[w].output.substr(at + said.size())), 10.0) << all;
  }
  const std::map<int, Round> rounds = CheckRounds(results);
  ASSERT_EQ(rounds.size(), 8u) << all;
  EXPECT_EQ(rounds.at(1).slots, "0,1,2");
  EXPECT_EQ(rounds.at(3).slots, "0,1") << "the survivors finish the round the lost worker left";
  EXPECT_EQ(rounds.at(8).slots, "0,1,2") << "the joiner trains the last round";
  // The joiner's own rounds: from the one after it joined, each equal to the others'.
  const std::map<int, Round> joiner = Rounds(results[3].output);
  ASSERT_FALSE(joiner.empty()) << all;
  EXPECT_GE(joiner.begin()->first, 4) << all;
  EXPECT_NE(results[0].output.find(absl::StrCat("round ", joiner.begin()->first - 1, ": slot(s) 2 joined")),
            std::string::npos)
      << all;
}

TEST(MembershipTest, AJoinerWithAnotherModelOrSlotZeroIsRefusedWhileTheOthersTrainOn) {
  const auto results = RunWorkers({{{"DISTLM_M_SLOT", "0"}}, {{"DISTLM_M_SLOT", "1"}},
                                   {{"DISTLM_M_SLOT", "1"}, {"DISTLM_M_ROLE", "joiner"},
                                    {"DISTLM_M_FINGERPRINT", "model=other\nvocab=abc"}},
                                   {{"DISTLM_M_SLOT", "0"}, {"DISTLM_M_ROLE", "joiner"}}},
                                  2);
  const std::string all = Outputs(results);
  EXPECT_EQ(results[0].exit_code, 0) << all;
  EXPECT_EQ(results[1].exit_code, 0) << all;
  EXPECT_EQ(results[2].exit_code, 2) << all;
  EXPECT_NE(results[2].output.find("error: slot 1 refused: it is not the model the workers train: its model is other, "
                                   "the workers' toy"),
            std::string::npos)
      << all;
  EXPECT_EQ(results[3].exit_code, 2) << all;
  EXPECT_NE(results[3].output.find("error: slot 0 refused: slot 0 hosts the store"), std::string::npos) << all;
  const std::map<int, Round> rounds = CheckRounds(results);
  ASSERT_EQ(rounds.size(), 6u) << all;
  for (const auto& [round, r] : rounds) EXPECT_EQ(r.slots, "0,1") << "round " << round;
}

// Slot 0 decides the last round's admissions and has nothing left to train; its process hosts
// the store, so it must not end while a worker has yet to read that decision.
TEST(MembershipTest, TheStoresHostOutlastsAWorkerThatReadsTheLastDecisionLate) {
  const auto results = RunWorkers({{{"DISTLM_M_SLOT", "0"}, {"DISTLM_M_ROUNDS", "2"}},
                                   {{"DISTLM_M_SLOT", "1"}, {"DISTLM_M_ROUNDS", "2"}, {"DISTLM_M_LAST_ADMIT_LATE_MS", "2000"}}},
                                  2);
  const std::string all = Outputs(results);
  EXPECT_EQ(results[0].exit_code, 0) << all;
  EXPECT_EQ(results[1].exit_code, 0) << all;
  EXPECT_EQ(CheckRounds(results).size(), 2u) << all;
}

TEST(MembershipTest, TheStoresHostGoingEndsTheOthersWithOneLine) {
  const auto results = RunWorkers({{{"DISTLM_M_SLOT", "0"}, {"DISTLM_M_DIE_IN_ROUND", "2"}},
                                   {{"DISTLM_M_SLOT", "1"}},
                                   {{"DISTLM_M_SLOT", "2"}}},
                                  3);
  const std::string all = Outputs(results);
  for (int w : {1, 2}) {
    EXPECT_EQ(results[w].exit_code, 2) << all;
    EXPECT_FALSE(results[w].timed_out) << all;
    EXPECT_NE(results[w].output.find("(slot 0's process) stopped answering, so the workers cannot meet again"),
              std::string::npos)
        << all;
  }
}

}  // namespace
}  // namespace distlm::task8

int main(int argc, char** argv) {
  if (std::getenv("DISTLM_M_ROLE") != nullptr) return distlm::RunMain(distlm::task8::Worker);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
