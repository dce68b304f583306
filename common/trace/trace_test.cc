// The trace's pieces on their own: interval arithmetic (hand-worked cases, and random spans
// against a count of every nanosecond), the recorder's Chrome JSON (the fields a viewer reads,
// nesting on each track, overlapping collectives on separate lanes), and the overlap analysis
// of a two-rank trace built by hand, whose every figure is worked out below.
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/runtime/errors.h"
#include "common/trace/intervals.h"
#include "common/trace/overlap.h"
#include "common/trace/recorder.h"

namespace distlm::trace {
namespace {

TEST(IntervalsTest, HandWorkedCases) {
  const auto u = Union({{5, 9}, {0, 2}, {1, 3}, {9, 10}, {4, 4}, {7, 6}});
  ASSERT_EQ(u.size(), 2u);  // [0,3) and [5,10): touching spans join, empty ones go
  EXPECT_EQ(u[0].begin, 0);
  EXPECT_EQ(u[0].end, 3);
  EXPECT_EQ(u[1].begin, 5);
  EXPECT_EQ(u[1].end, 10);
  EXPECT_EQ(Length(u), 8);
  EXPECT_EQ(Length(Intersect(u, Union({{2, 6}, {8, 20}}))), 1 + 1 + 2);
  EXPECT_EQ(Length(UnionWithin({{0, 100}, {150, 300}}, {50, 200})), 50 + 50);
  EXPECT_TRUE(Intersect(u, {}).empty());
}

TEST(IntervalsTest, RandomSpansAgreeWithACountOfEveryNanosecond) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Interval> a, b;
    for (int i = 0; i < 6; ++i) {
      const int64_t x = rng() % 100, y = rng() % 100;
      (i % 2 ? a : b).push_back({x, x + static_cast<int64_t>(y % 30)});
    }
    int64_t in_a = 0, in_b = 0, in_both = 0, in_either = 0;
    for (int64_t t = 0; t < 140; ++t) {
      bool ia = false, ib = false;
      for (const auto& s : a) ia = ia || (s.begin <= t && t < s.end);
      for (const auto& s : b) ib = ib || (s.begin <= t && t < s.end);
      in_a += ia;
      in_b += ib;
      in_both += ia && ib;
      in_either += ia || ib;
    }
    const auto ua = Union(a), ub = Union(b);
    std::vector<Interval> all = a;
    all.insert(all.end(), b.begin(), b.end());
    ASSERT_EQ(Length(ua), in_a) << "trial " << trial;
    ASSERT_EQ(Length(Intersect(ua, ub)), in_both) << "trial " << trial;
    // Inclusion-exclusion, the form torchtitan's analysis uses.
    ASSERT_EQ(Length(Union(all)), in_a + in_b - in_both) << "trial " << trial;
    ASSERT_EQ(Length(Union(all)), in_either) << "trial " << trial;
    ASSERT_EQ(Length(Subtract(ua, ub)), in_a - in_both) << "trial " << trial;
  }
}

// The events of one (pid, tid) track, begin and end in ns.
std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> Tracks(const nlohmann::json& t) {
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> tracks;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int64_t b = std::llround(e["ts"].get<double>() * 1000);
    tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].emplace_back(b, b + std::llround(e["dur"].get<double>() * 1000));
  }
  return tracks;
}

TEST(RecorderTest, WritesWhatAViewerNeeds) {
  Recorder r(/*rank=*/1, /*world_size=*/2);
  ClockMapping clock;
  clock.base_ns = 1'000'000;
  clock.offset_ns = 500;
  clock.synced = true;
  r.SetClock(clock);
  r.Span(cat::kUpdate, "update 3", 1'000'000, 1'100'000, {{"update", 3}});
  r.Span(cat::kBackward, "backward", 1'010'000, 1'060'000);
  // Three collectives, two of them in flight together: two lanes.
  r.Collective("allreduce", 1'020'000, 1'050'000, {{"bytes", 4096}});
  r.Collective("allreduce", 1'030'000, 1'070'000, {{"bytes", 4096}});
  r.Collective("allgather", 1'080'000, 0, {{"bytes", 16}});
  r.Counter("memory", 1'090'000, {{"in_use_bytes", 123}});
  const nlohmann::json t = r.ToJson({{"stage", "task3"}});
  EXPECT_EQ(t["displayTimeUnit"], "ms");
  EXPECT_EQ(t["otherData"]["rank"], 1);
  EXPECT_EQ(t["distributedInfo"]["rank"], 1) << "HolisticTraceAnalysis's key for the rank";
  EXPECT_EQ(t["otherData"]["stage"], "task3");
  EXPECT_EQ(t["otherData"]["clock"]["offset_ns"], 500);
  std::set<std::pair<int, int>> named;
  for (const auto& e : t["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name")) << e.dump();
    if (e["ph"] == "M" && e["name"] == "thread_name") named.insert({e["pid"].get<int>(), e["tid"].get<int>()});
    if (e["ph"] != "X") continue;
    for (const char* key : {"cat", "ts", "dur", "tid"}) EXPECT_TRUE(e.contains(key)) << key << " in " << e.dump();
    EXPECT_EQ(e["pid"], 1);
    EXPECT_GE(e["ts"].get<double>(), 0.0);
  }
  // The update starts at base + offset: 0.5 us.
  for (const auto& e : t["traceEvents"]) {
    if (e.value("cat", "") == "update") {
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.5);
    }
  }
  const auto tracks = Tracks(t);
  EXPECT_EQ(tracks.size(), 3u) << "the main thread and two lanes";
  for (const auto& [track, spans] : tracks) {
    EXPECT_EQ(named.count(track), 1u) << "track " << track.first << "/" << track.second << " has no name";
    // On one track, spans nest or follow each other: a viewer draws nothing else right.
    for (size_t i = 0; i < spans.size(); ++i) {
      for (size_t j = i + 1; j < spans.size(); ++j) {
        const auto& [a0, a1] = spans[i];
        const auto& [b0, b1] = spans[j];
        const bool apart = a1 <= b0 || b1 <= a0, nested = (a0 <= b0 && b1 <= a1) || (b0 <= a0 && a1 <= b1);
        EXPECT_TRUE(apart || nested) << "track " << track.second << ": [" << a0 << "," << a1 << ") and [" << b0 << ","
                                     << b1 << ") overlap without nesting";
      }
    }
  }
}

// Two ranks, one update of 100 us each, built by hand:
//   rank 0: forward [0,20) backward [20,60) step [80,100); collectives [30,50) and [55,75)
//   rank 1: forward [0,20) backward [20,70) step [85,100); collectives [40,50) and [65,80)
// Rank 0: C = [0,60) u [80,100) = 80; M = [30,50) u [55,75) = 40; hidden = 20 + 5 = 25;
//   exposed 15; idle = 100 - |[0,75) u [80,100)| = 5; waiting = (40-30) + (65-55) = 20.
// Rank 1: C = [0,70) u [85,100) = 85; M = [40,50) u [65,80) = 25; hidden = 10 + 5 = 15;
//   exposed 10; idle = 100 - |[0,80) u [85,100)| = 5; waiting 0 (it launched last both times).
nlohmann::json TwoRankTrace() {
  nlohmann::json events = nlohmann::json::array();
  auto x = [&](int pid, const char* c, double ts, double dur, nlohmann::json args = nullptr) {
    nlohmann::json e = {{"ph", "X"}, {"pid", pid}, {"tid", 1}, {"cat", c}, {"name", c}, {"ts", ts}, {"dur", dur}};
    if (!args.is_null()) e["args"] = args;
    events.push_back(e);
  };
  x(0, "update", 0, 100, {{"update", 7}});
  x(0, "forward", 0, 20);
  x(0, "backward", 20, 40);
  x(0, "optimizer_step", 80, 20);
  x(0, "comm", 30, 20);
  x(0, "comm", 55, 20);
  x(1, "update", 0, 100, {{"update", 7}});
  x(1, "forward", 0, 20);
  x(1, "backward", 20, 50);
  x(1, "optimizer_step", 85, 15);
  x(1, "comm", 40, 10);
  x(1, "comm", 65, 15);
  return {{"traceEvents", events}};
}

TEST(RecorderTest, UnitBackwardMarksBecomeSpansInTheOrderTheyCame) {
  Recorder r(0, 1);
  r.SetClock({0, 0, 0, false});
  // Autograd reaches the head (unit 2) first, the embeddings (unit 0) last.
  r.MarkUnitBackward(1, 3000);
  r.MarkUnitBackward(2, 1000);
  r.MarkUnitBackward(0, 6000);
  r.EndBackward(10000);
  std::map<std::string, std::pair<double, double>> spans;
  const nlohmann::json t = r.ToJson({});  // kept: a range-for over a temporary's member dangles
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "X") spans[e["name"]] = {e["ts"].get<double>(), e["dur"].get<double>()};
  }
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans["backward, unit 2"], std::make_pair(1.0, 2.0));  // microseconds
  EXPECT_EQ(spans["backward, unit 1"], std::make_pair(3.0, 3.0));
  EXPECT_EQ(spans["backward, unit 0"], std::make_pair(6.0, 4.0));
  r.EndBackward(20000);  // nothing marked since: nothing added
  EXPECT_EQ(r.size(), 3u);
}

// A unit hook inside forward is not compute: a 10 us hook inside a 30 us forward leaves 20.
TEST(OverlapTest, UnitHooksAreNotCompute) {
  nlohmann::json events = nlohmann::json::array();
  auto x = [&](const char* c, double ts, double dur, nlohmann::json args = nullptr) {
    nlohmann::json e = {{"ph", "X"}, {"pid", 0}, {"tid", 1}, {"cat", c}, {"name", c}, {"ts", ts}, {"dur", dur}};
    if (!args.is_null()) e["args"] = args;
    events.push_back(e);
  };
  x("update", 0, 50, {{"update", 1}});
  x("forward", 0, 30);
  x("unit_hook", 5, 10);
  x("comm", 8, 4);
  const auto rows = AnalyseOverlap({{"traceEvents", events}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].compute_ms, 20e-3);
  EXPECT_DOUBLE_EQ(rows[0].comm_hidden_ms, 0.0) << "the collective ran while the hook waited";
  EXPECT_DOUBLE_EQ(rows[0].idle_ms, 50e-3 - 20e-3 - 4e-3);
}

// Two collectives that rank 0 launched 10 us before rank 1, 1 us apart: it waited 11 us (from
// the first launch to rank 1's second), not 20.
TEST(OverlapTest, WaitingForTheSlowerRankIsAUnionOfTheWaits) {
  nlohmann::json events = nlohmann::json::array();
  auto x = [&](int pid, const char* c, double ts, double dur, nlohmann::json args = nullptr) {
    nlohmann::json e = {{"ph", "X"}, {"pid", pid}, {"tid", 1}, {"cat", c}, {"name", c}, {"ts", ts}, {"dur", dur}};
    if (!args.is_null()) e["args"] = args;
    events.push_back(e);
  };
  for (int pid : {0, 1}) x(pid, "update", 0, 50, {{"update", 1}});
  x(0, "comm", 0, 30);
  x(0, "comm", 1, 30);
  x(1, "comm", 10, 20);
  x(1, "comm", 11, 20);
  const auto rows = AnalyseOverlap({{"traceEvents", events}});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[0].waiting_ms, 11e-3);
  EXPECT_DOUBLE_EQ(rows[1].waiting_ms, 0.0);
}

TEST(OverlapTest, ATwoRankTraceGivesItsClosedForm) {
  const auto rows = AnalyseOverlap(TwoRankTrace());
  ASSERT_EQ(rows.size(), 2u);
  const double us = 1e-3;  // the trace is in microseconds, the figures in ms
  EXPECT_EQ(rows[0].update, 7);
  EXPECT_EQ(rows[0].collectives, 2);
  EXPECT_DOUBLE_EQ(rows[0].step_ms, 100 * us);
  EXPECT_DOUBLE_EQ(rows[0].compute_ms, 80 * us);
  EXPECT_DOUBLE_EQ(rows[0].comm_busy_ms, 40 * us);
  EXPECT_DOUBLE_EQ(rows[0].comm_hidden_ms, 25 * us);
  EXPECT_DOUBLE_EQ(rows[0].comm_exposed_ms, 15 * us);
  EXPECT_DOUBLE_EQ(rows[0].idle_ms, 5 * us);
  EXPECT_DOUBLE_EQ(rows[0].waiting_ms, 20 * us);
  EXPECT_DOUBLE_EQ(rows[1].compute_ms, 85 * us);
  EXPECT_DOUBLE_EQ(rows[1].comm_busy_ms, 25 * us);
  EXPECT_DOUBLE_EQ(rows[1].comm_hidden_ms, 15 * us);
  EXPECT_DOUBLE_EQ(rows[1].idle_ms, 5 * us);
  EXPECT_DOUBLE_EQ(rows[1].waiting_ms, 0);
  const std::string table = OverlapTable(rows);
  EXPECT_NE(table.find("  62.5%"), std::string::npos) << table;  // rank 0 hid 25 of 40
  EXPECT_NE(table.find("mean"), std::string::npos) << table;
}

TEST(OverlapTest, ATraceWithoutUpdatesIsAOneLineError) {
  try {
    AnalyseOverlap({{"traceEvents", nlohmann::json::array()}});
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no update span"), std::string::npos) << e.what();
  }
  EXPECT_THROW(AnalyseOverlap(nlohmann::json::array()), UserError);
}

}  // namespace
}  // namespace distlm::trace
