#include "common/testing/rank_test.h"

#include <chrono>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/dist/dist.h"
#include "common/runtime/errors.h"
#include "common/testing/subprocess.h"

namespace distlm::testing {
namespace {

constexpr char kCaseVar[] = "DISTLM_RANK_TEST_CASE";
constexpr char kLinePrefix[] = "rank_test: ";

std::map<std::string, RankBody>& Cases() {
  static auto* cases = new std::map<std::string, RankBody>();
  return *cases;
}

struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? -1 : std::atoi(v);
}

// "allreduce=41 broadcast=6": what passed through the harness's own counting layer.
std::string Tally(dist::CountingProcessGroup& tally) {
  std::map<std::string, int> ops;
  for (const auto& r : tally.TakeStats().records) ++ops[r.op];
  std::string out;
  for (const auto& [op, n] : ops) out += (out.empty() ? "" : " ") + op + "=" + std::to_string(n);
  return out.empty() ? "none" : out;
}

// The rendezvous store, once the group is up: ranks wait for each other there before leaving.
c10::intrusive_ptr<c10d::Store>& Store() {
  static auto* store = new c10::intrusive_ptr<c10d::Store>();
  return *store;
}

// One report line to the parent, then out without running destructors: a Gloo group whose peers
// are stuck in a collective can block its own teardown. First, up to 5 s for the other ranks to
// get this far: rank 0 serves the store, and leaving early would strand a slower rank still
// connecting to it (it would then wait for its timeout).
[[noreturn]] void Report(int rank, const std::string& kind, const std::string& message, const std::string& tally,
                         int code) {
  if (Store()) {
    try {
      const int world = EnvInt("DISTLM_RANK_TEST_WORLD");
      Store()->add("rank_test_done", 1);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (Store()->add("rank_test_done", 0) < world && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    } catch (const std::exception&) {
      // The store is gone (rank 0 left): nothing to wait for.
    }
  }
  std::string one = message;
  for (char& c : one) {
    if (c == '\n') c = ' ';
  }
  std::printf("%s%d %s %s\n%scalls %d %s\n", kLinePrefix, rank, kind.c_str(), one.c_str(), kLinePrefix, rank,
              tally.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

int WorkerMain(const std::string& name) {
  const int rank = EnvInt("DISTLM_RANK_TEST_RANK"), world = EnvInt("DISTLM_RANK_TEST_WORLD");
  auto it = Cases().find(name);
  if (it == Cases().end()) Report(rank, "ERROR", "no rank case named " + name, "none", 2);
  dist::DistConfig config;
  config.backend = "gloo";
  config.master_ip = "127.0.0.1";
  config.master_port = EnvInt("DISTLM_RANK_TEST_PORT");
  config.world_size = world;
  config.rank = rank;
  config.timeout_s = kCollectiveTimeoutS;
  std::unique_ptr<dist::DistContext> ctx;
  try {
    ctx = std::make_unique<dist::DistContext>(dist::InitDistributed(config));
  } catch (const std::exception& e) {
    Report(rank, "ERROR", "could not start the process group: " + OneLine(e), "none", 2);
  }
  Store() = ctx->store;
  auto tally = c10::make_intrusive<dist::CountingProcessGroup>(ctx->pg);
  auto counting = c10::make_intrusive<dist::CountingProcessGroup>(dist::AsGroup(tally, "gloo"));
  RankEnv env{rank, world, dist::AsGroup(counting, "gloo"), counting.get(),
              [&ctx](const std::vector<std::vector<int>>& parts, const std::string& tag) {
                return dist::NewSubgroup(*ctx, parts, tag);
              },
              ctx->store};
  try {
    it->second(env);
  } catch (const CheckFailed& e) {
    Report(rank, "FAIL", e.what(), Tally(*tally), 3);
  } catch (const std::exception& e) {
    const std::string what = OneLine(e);
    if (what.find("TODO(student)") != std::string::npos) Report(rank, "STUB", what, Tally(*tally), 4);
    Report(rank, "ERROR", what, Tally(*tally), 2);
  }
  Report(rank, "OK", "", Tally(*tally), 0);
}

struct RankReport {
  std::string kind = "LOST";  // OK, FAIL, STUB, ERROR; LOST: never reported
  std::string message;
  std::string calls = "unknown";
  bool timed_out = false;
};

RankReport Parse(int rank, const ProcessResult& r) {
  RankReport out;
  out.timed_out = r.timed_out;
  std::istringstream in(r.output);
  std::string line;
  const std::string head = kLinePrefix + std::to_string(rank) + " ";
  const std::string calls = std::string(kLinePrefix) + "calls " + std::to_string(rank) + " ";
  while (std::getline(in, line)) {
    if (line.rfind(calls, 0) == 0) {
      out.calls = line.substr(calls.size());
    } else if (line.rfind(head, 0) == 0) {
      std::string rest = line.substr(head.size());
      const size_t sp = rest.find(' ');
      out.kind = rest.substr(0, sp);
      out.message = sp == std::string::npos ? "" : rest.substr(sp + 1);
    }
  }
  return out;
}

std::string LastLines(const std::string& text, int n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l.rfind(kLinePrefix, 0) != 0) lines.push_back(l);
  }
  std::string out;
  for (size_t i = lines.size() > static_cast<size_t>(n) ? lines.size() - n : 0; i < lines.size(); ++i) {
    out += "\n    " + lines[i];
  }
  return out;
}

}  // namespace

bool RegisterRankCase(const std::string& name, RankBody body) {
  Cases()[name] = std::move(body);
  return true;
}

void Fail(const std::string& message) { throw CheckFailed(message); }

std::string RunRanks(const std::string& name, int world) {
  const int port = FreePort();
  std::vector<Command> commands;
  for (int r = 0; r < world; ++r) {
    Command c;
    c.argv = {SelfPath()};
    c.env = {{kCaseVar, name},
             {"DISTLM_RANK_TEST_RANK", std::to_string(r)},
             {"DISTLM_RANK_TEST_WORLD", std::to_string(world)},
             {"DISTLM_RANK_TEST_PORT", std::to_string(port)},
             {"OMP_NUM_THREADS", "1"}};
    commands.push_back(std::move(c));
  }
  std::vector<ProcessResult> results = RunAll(commands, kCollectiveTimeoutS + 10);
  std::vector<RankReport> reports;
  for (int r = 0; r < world; ++r) reports.push_back(Parse(r, results[r]));

  // A stub first: nothing else matters until it is written.
  for (int r = 0; r < world; ++r) {
    if (reports[r].kind == "STUB") return "your code still calls StudentTodo: " + reports[r].message;
  }
  std::string failures;
  for (int r = 0; r < world; ++r) {
    if (reports[r].kind == "FAIL") failures += "\n  rank " + std::to_string(r) + ": " + reports[r].message;
  }
  if (!failures.empty()) return failures;

  bool stuck = false;
  for (const auto& rep : reports) {
    stuck = stuck || rep.timed_out || rep.message.find("imeout") != std::string::npos ||
            rep.message.find("timed out") != std::string::npos;
  }
  std::string counts;
  for (int r = 0; r < world; ++r) counts += "\n  rank " + std::to_string(r) + " called: " + reports[r].calls;
  if (stuck) {
    std::string finished;
    for (int r = 0; r < world; ++r) {
      if (reports[r].kind == "OK") finished += (finished.empty() ? "" : ", ") + std::to_string(r);
    }
    char limit[32];
    std::snprintf(limit, sizeof(limit), "%.0f s", kCollectiveTimeoutS);
    return std::string("a collective never completed: deadlock avoided after ") + limit +
           (finished.empty() ? "" : "; rank(s) " + finished + " finished without joining it") +
           ". Every rank must launch the same collectives, in the same order, the same number of times:" + counts;
  }
  std::string errors;
  for (int r = 0; r < world; ++r) {
    if (reports[r].kind == "OK") continue;
    errors += "\n  rank " + std::to_string(r) + ": " +
              (reports[r].kind == "LOST" ? "exited with code " + std::to_string(results[r].exit_code) +
                                               " without reporting (crashed?)" + LastLines(results[r].output, 8)
                                         : reports[r].message);
  }
  return errors;
}

int RankTestMain(int argc, char** argv) {
  if (const char* name = std::getenv(kCaseVar)) return WorkerMain(name);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

}  // namespace distlm::testing

int main(int argc, char** argv) { return distlm::testing::RankTestMain(argc, argv); }
