#include "grading/traffic_check.h"

#include <exception>

#include "common/safetensors/header.h"
#include "grading/trace.h"
#include "task4_bench/traffic.h"

namespace distlm::grading {

std::string TrafficVerdict::Describe() const {
  if (!counted) return "";
  const std::string mb = Fmt("%.1f", counted_bytes / 1e6) + " MB";
  // The yardstick: what the grader's own run of the layout sent, or task 4's closed form.
  const bool measured = reference_bytes > 0;
  const std::string yardstick = Fmt("%.1f", (measured ? reference_bytes : least_bytes) / 1e6) + " MB";
  if (enough) {
    return "network: the ranks sent " + mb + " over loopback (counted by the grader, outside your processes; the " +
           (measured ? "grader's own run of this layout sent " : "synchronisation needs at least ") + yardstick + ")";
  }
  return "the grader counted " + mb + " sent over the ranks' network during this run (outside your processes), " +
         (measured ? "but its own run of the same layout sent " + yardstick +
                         ": the log reports communication that did not go over the network"
                   : "but synchronising the gradients of every logged update needs at least " + yardstick +
                         ": the log reports a synchronisation that did not go over the network") +
         ", so it is not credited";
}

void TrafficVerdict::Judge(TestResult* parity) const {
  if (counted && !enough && !parity->passed) {
    // Already failed on its numbers, which say what is wrong first (a mistake that skips a
    // collective also sends less).
    parity->output += Describe() + "\n";
  } else if (counted && !enough) {
    parity->passed = false;
    parity->score = 0;
    parity->output = Describe() + ".\n\n" + parity->output;
  } else if (counted) {
    parity->output += Describe() + "\n";
  }
}

TrafficVerdict CheckTraffic(const StageRun& run, const stages::Row& st, int ranks, double gradient_bytes,
                            size_t updates) {
  TrafficVerdict v;
  if (run.network_bytes < 0 || ranks < 2 || gradient_bytes <= 0 || updates == 0 ||
      st.report.pattern == stages::SyncPattern::kNone) {
    return v;
  }
  v.counted = true;
  v.counted_bytes = static_cast<double>(run.network_bytes);
  const double per_update = task4_bench::ExpectedTrafficPerUpdate(st.report.pattern, gradient_bytes, ranks).total_sent;
  v.least_bytes = kMinTrafficShare * per_update * static_cast<double>(updates);
  v.enough = v.counted_bytes >= v.least_bytes;
  return v;
}

TrafficVerdict CheckTrafficAgainst(const StageRun& run, double reference_bytes) {
  TrafficVerdict v;
  if (run.network_bytes < 0 || reference_bytes <= 0) return v;
  v.counted = true;
  v.counted_bytes = static_cast<double>(run.network_bytes);
  v.reference_bytes = reference_bytes;
  v.least_bytes = kMinTrafficShare * reference_bytes;
  v.enough = v.counted_bytes >= v.least_bytes;
  return v;
}

double TensorBytesOf(const std::string& safetensors_bytes) {
  try {
    return static_cast<double>(safetensors::SplitFile(safetensors_bytes, "the grader's model.safetensors").data.size());
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace distlm::grading
