#include "task3/grading/ddp_checks.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/stages/stages.h"
#include "grading/stage_grading.h"
#include "grading/text.h"

namespace distlm::grading {
namespace {

// The unused parameter's name (task3/ddp_stage.h's kUnusedParameterName; the grader does not
// link task 3).
constexpr char kUnusedName[] = "unused_by_the_loss.weight";

void Pass(TestResult& t, const std::string& output) {
  t.passed = true;
  t.score = t.max_score;
  t.output = output;
}

// A JSON file the run wrote (read only if it is the run's own; see StageRun::ReadOutput).
nlohmann::json ReadJson(const StageRun& r, const std::string& name) {
  const std::string text = r.ReadOutput(name, 16 << 20);
  if (text.empty()) return nullptr;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? nlohmann::json(nullptr) : j;
}

// The numel of each entry of a JSON array of objects; empty when the file is not that.
std::vector<int64_t> Numels(const nlohmann::json& list) {
  std::vector<int64_t> out;
  if (!list.is_array()) return out;
  for (const auto& e : list) {
    if (!e.is_object() || !e.contains("numel") || !e["numel"].is_number_integer()) return {};
    out.push_back(e["numel"].get<int64_t>());
  }
  return out;
}

std::string List(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 12; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > 12) s += ", ...";
  return "[" + s + "]";
}

// Each update launched at least all but one of its all-reduces before backward ended; "" or
// the first update that did not, in words.
std::string LateLaunches(const StageRun& r, const std::string& what) {
  for (size_t u = 0; u < r.log.size(); ++u) {
    const int64_t n = IntegerField(r.log[u], "buckets"), early = IntegerField(r.log[u], "buckets_started_before_backward_end");
    if (n <= 0) return "update " + std::to_string(u + 1) + " launched no all-reduce";
    if (early < n - 1) {
      return "in update " + std::to_string(u + 1) + ", only " + std::to_string(std::max<int64_t>(early, 0)) + " of your " +
             std::to_string(n) + " " + what + " all-reduces started before backward ended: the all-reduce of " + what +
             " " + std::to_string(std::max<int64_t>(early, 0)) +
             " started after backward ended. Launch each all-reduce from the hook that completes it (as soon as "
             "its gradients are in), not in FinishGradientSync: communication that starts after backward "
             "cannot overlap with it";
    }
  }
  return "";
}

void Layout(const StageRun& r, const DdpCheckContext& c, TestResult& t) {
  const std::vector<int64_t> params = Numels(ReadJson(r, "ddp_parameters.json"));
  const std::vector<int64_t> got = Numels(ReadJson(r, "ddp_buckets.json"));
  if (params.empty()) {
    t.output = "the run wrote no readable ddp_parameters.json (task3/ddp_stage.cc writes it; was it changed?)\n";
    return;
  }
  if (got.empty()) {
    t.output = "the run wrote no readable ddp_buckets.json: your DDP launched no all-reduce in update 1\n";
    return;
  }
  const int64_t cap = static_cast<int64_t>(c.bucket_cap_mb * (1 << 20));
  const std::vector<int64_t> want = ExpectedBuckets(params, cap, /*last_first=*/true);
  const std::string rule = "buckets filled from the last parameter to the first, each closed once it holds at least " +
                           Fmt("%g", c.bucket_cap_mb) + " MiB";
  if (got == want) {
    for (size_t u = 0; u < r.log.size(); ++u) {
      if (IntegerField(r.log[u], "buckets") != static_cast<int64_t>(want.size())) {
        t.output = "update " + std::to_string(u + 1) + " launched " + std::to_string(IntegerField(r.log[u], "buckets")) +
                   " all-reduces where the " + std::to_string(want.size()) +
                   " buckets need one each: every update must all-reduce each bucket exactly once\n";
        return;
      }
    }
    Pass(t, std::to_string(want.size()) + " buckets of " + List(want) + " elements, " + rule + "\n");
    return;
  }
  if (got == ExpectedBuckets(params, cap, /*last_first=*/false)) {
    t.output = "your buckets are filled from the FIRST parameter (the embeddings) on. Backward produces the last "
               "parameters' gradients first, so bucket 0 must start from the last parameter, or no bucket can be "
               "sent before backward is nearly done (" + rule + ")\n";
    return;
  }
  t.output = "your all-reduces of update 1, in launch order, break the bucket rule (" + rule + ") at " +
             FirstBrokenBucket(got, want, params, cap) + "\n";
}

// The log's account first (an honest run that says it launched late is told so without a timed
// run); then the time, which the log cannot change (overlap_check.h).
void Overlap(const StageRun& r, const DdpCheckContext& c, TestResult& t) {
  const std::string late = LateLaunches(r, "bucket");
  if (!late.empty()) {
    t.output = late + "\n";
    return;
  }
  if (!c.overlap) {
    t.output = "overlap not judged: the grader cannot time it here\n";
    return;
  }
  // The timed run must match too, and would not: the time of a wrong update is not judged.
  if (c.expected != nullptr && !ParityDiff(*c.expected, TraceOf(r)).empty()) {
    t.output = "not checked: the main run does not match the single-node run (see '" +
               stages::Get("task3").grading.parity_test().name + "'); overlap is timed only for a DDP whose updates are right\n";
    return;
  }
  const OverlapVerdict v = c.overlap(c.ranks, {}, "its bucket all-reduces");
  if (!v.ok) {
    t.output = v.message;
    return;
  }
  const double busy = SumOfField(r.log, "comm_busy_ms"), hidden = SumOfField(r.log, "comm_hidden_ms");
  Pass(t, v.message + "your log: " + Fmt("%.0f", hidden) + " of " + Fmt("%.0f", busy) +
              " ms of communication overlapped with backward over the main run\n");
}

// Runs `extra` and checks parity; false (with the message in t) when the run or the parity fails.
bool RunsAndMatches(const DdpCheckContext& c, int ranks, const std::vector<std::string>& extra, TestResult& t,
                    StageRun* out) {
  *out = c.run(ranks, extra, 0);
  std::string flags;
  for (const auto& f : extra) flags += " " + f;
  if (!out->Completed(kSteps)) {
    t.output = "the run with" + flags + " on " + std::to_string(ranks) + " ranks did not complete: " + c.run_failure(*out);
    return false;
  }
  const Trace got = TraceOf(*out);
  const std::string diff = ParityDiff(*c.expected, got);
  if (!diff.empty()) {
    t.output = "with" + flags + ": " + c.diagnose(got) + "\n\n" + diff + ".\n" + TraceTable(*c.expected, got);
    return false;
  }
  if (c.traffic) {
    if (const std::string problem = c.traffic(*out, ranks, extra); !problem.empty()) {
      t.output = "with" + flags + ": " + problem + "\n";
      return false;
    }
  }
  return true;
}

void PerParameter(const DdpCheckContext& c, TestResult& parity, TestResult& shape) {
  StageRun r;
  if (!RunsAndMatches(c, c.ranks, {"--ddp=per_parameter"}, parity, &r)) {
    shape.output = "not checked: see '" + parity.name + "'\n";
    return;
  }
  Pass(parity, "--ddp=per_parameter: the " + std::to_string(kSteps) +
                   " losses and gradient norms match the single-node run (worst " +
                   Fmt("%.1e", WorstDifference(*c.expected, TraceOf(r))) + ")\n");
  const size_t n = Numels(ReadJson(r, "ddp_parameters.json")).size();
  for (size_t u = 0; u < r.log.size(); ++u) {
    const int64_t calls = IntegerField(r.log[u], "buckets");
    if (calls != static_cast<int64_t>(n)) {
      shape.output = "update " + std::to_string(u + 1) + " of --ddp=per_parameter launched " + std::to_string(calls) +
                     " all-reduces for " + std::to_string(n) + " parameters: 3a launches one per parameter, from "
                     "that parameter's hook\n";
      return;
    }
  }
  const std::string late = LateLaunches(r, "parameter");
  if (!late.empty()) {
    shape.output = "--ddp=per_parameter: " + late + "\n";
    return;
  }
  Pass(shape, "one all-reduce per parameter (" + std::to_string(n) + "), launched during backward\n");
}

// An accumulating run may send at most this many times the main run's bytes (measured: the same
// bytes within 1 %, and 1.9 times when the accumulating backward communicates too).
constexpr double kMaxNoSyncTrafficRatio = 1.4;

void NoSync(const StageRun& main_run, const DdpCheckContext& c, TestResult& t) {
  // Two micro-batches per update, the same total batch (fewer ranks if 8 cannot be split).
  int ranks = c.ranks;
  while (ranks > 1 && kTotalBatch % (2 * ranks) != 0) ranks /= 2;
  StageRun r;
  if (!RunsAndMatches(c, ranks,
                      {"--gradient_accumulation_steps=2",
                       "--per_gpu_train_batch_size=" + std::to_string(kTotalBatch / ranks / 2)},
                      t, &r)) {
    return;
  }
  const int64_t once = IntegerField(main_run.log[0], "comm_bytes");
  for (size_t u = 0; u < r.log.size(); ++u) {
    const int64_t during = IntegerField(r.log[u], "no_sync_calls"), bytes = IntegerField(r.log[u], "comm_bytes");
    if (during != 0) {
      t.output = "with --gradient_accumulation_steps=2, your DDP launched " + std::to_string(during) +
                 " collective(s) during the backward of update " + std::to_string(u + 1) +
                 " that only accumulates (set_require_grad_sync(false)): while sync is off, the hooks must send "
                 "nothing; the next synchronised backward sends the accumulated .grad\n";
      return;
    }
    if (bytes != once) {
      t.output = "with --gradient_accumulation_steps=2, update " + std::to_string(u + 1) + " all-reduced " +
                 std::to_string(bytes) + " bytes where one pass over the gradients is " + std::to_string(once) +
                 ": each gradient must be sent once per update\n";
      return;
    }
  }
  // The kernel's count, which the log cannot change: the same updates over the same ranks send
  // the same gradients once each, accumulation or not; an accumulating backward that
  // communicated sends them about twice.
  if (ranks == c.ranks && r.network_bytes > 0 && main_run.network_bytes > 0 &&
      r.network_bytes > kMaxNoSyncTrafficRatio * main_run.network_bytes) {
    t.output = "with --gradient_accumulation_steps=2, your ranks sent " + Fmt("%.1f", r.network_bytes / 1e6) +
               " MB over loopback (the kernel's count), " + Fmt("%.1f", 1.0 * r.network_bytes / main_run.network_bytes) +
               " times what the main run sent for as many updates: the backward that only accumulates communicated. "
               "While sync is off, the hooks must send nothing\n";
    return;
  }
  const std::string counted =
      r.network_bytes > 0 && main_run.network_bytes > 0
          ? " (the kernel counted " + Fmt("%.2f", 1.0 * r.network_bytes / main_run.network_bytes) +
                " times the main run's bytes)"
          : "";
  Pass(t, "--gradient_accumulation_steps=2 on " + std::to_string(ranks) +
              " ranks: the losses and gradient norms match the single-node run (worst " +
              Fmt("%.1e", WorstDifference(*c.expected, TraceOf(r))) +
              "), nothing sent while accumulating, each gradient sent once per update" + counted + "\n");
}

void Unused(const DdpCheckContext& c, TestResult& t) {
  const StageRun r = c.run(2, {"--ddp_unused_parameter", "--max_steps=1"}, 60);
  const std::string how = "with --ddp_unused_parameter (the DDP is also given '" + std::string(kUnusedName) +
                          "', which no loss uses) on 2 ranks: ";
  if (r.timed_out) {
    t.output = how + "the run hung. FinishGradientSync must not wait for a gradient that never comes: check which "
                     "parameters received no gradient and throw distlm::UserError naming them\n";
    return;
  }
  if (r.exit_code == 0) {
    t.output = how + "your DDP trained on without complaint. A parameter whose gradient never arrives is never "
                     "all-reduced, so the ranks drift apart silently: FinishGradientSync must throw "
                     "distlm::UserError naming it\n";
    return;
  }
  for (const std::string& line : Lines(r.output)) {
    if (line.find("error: ") != std::string::npos && line.find(kUnusedName) != std::string::npos) {
      Pass(t, how + "the run failed as it should, saying:\n    " + line.substr(0, 300) + "\n");
      return;
    }
  }
  t.output = how + "the run failed, but no error line names '" + kUnusedName +
             "'. Throw distlm::UserError with the names of the parameters that received no gradient.\n" +
             c.run_failure(r);
}

}  // namespace

// Where the launched sizes `got` first leave the rule's buckets `want` (the same parameters,
// `params` in registration order), and which property that bucket breaks; never the rule's sizes,
// which would hand the answer over.
std::string FirstBrokenBucket(const std::vector<int64_t>& got, const std::vector<int64_t>& want,
                              const std::vector<int64_t>& params, int64_t cap) {
  size_t k = 0;
  while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
  const std::string bucket = "bucket " + std::to_string(k);
  if (k >= want.size()) return bucket + ": every parameter was already in a bucket; each bucket is all-reduced once";
  if (k >= got.size()) return bucket + ": the all-reduces ended before every parameter was in one";
  // The parameters from the start of bucket k on, the last first: where may bucket k end?
  int64_t start = 0;
  for (size_t b = 0; b < k; ++b) start += got[b];
  int64_t seen = 0, held = 0;
  auto it = params.rbegin();
  while (it != params.rend() && seen < start) seen += *it++;
  while (it != params.rend() && held < got[k]) {
    held += *it++;
  }
  const std::string size = " (" + std::to_string(got[k] * 4) + " bytes)";
  if (held != got[k]) return bucket + size + ": it cuts a parameter in two; a bucket holds whole parameters";
  if (got[k] < want[k]) {
    return bucket + size + ": it closed before reaching the cap of " + std::to_string(cap) +
           " bytes, though it is not the last; a bucket closes once it reaches the cap";
  }
  return bucket + size + ": it had reached the cap of " + std::to_string(cap) + " bytes before its last parameter " +
         "joined it; a bucket closes as soon as it reaches the cap";
}

std::vector<int64_t> ExpectedBuckets(const std::vector<int64_t>& numels, int64_t cap_bytes, bool last_first) {
  std::vector<int64_t> buckets;
  int64_t bytes = cap_bytes;  // "full": the first parameter opens a bucket
  for (size_t k = 0; k < numels.size(); ++k) {
    const int64_t n = numels[last_first ? numels.size() - 1 - k : k];
    if (bytes >= cap_bytes) {
      buckets.push_back(0);
      bytes = 0;
    }
    buckets.back() += n;
    bytes += n * 4;
  }
  return buckets;
}

std::vector<TestResult> DdpTests(const StageRun& main_run, const DdpCheckContext& c) {
  std::vector<TestResult> t = OwnTests(stages::Get("task3"));
  Layout(main_run, c, t[0]);
  Overlap(main_run, c, t[1]);
  PerParameter(c, t[2], t[3]);
  NoSync(main_run, c, t[4]);
  Unused(c, t[5]);
  return t;
}

}  // namespace distlm::grading
