#include "grading/overlap_check.h"

#include <algorithm>
#include <cmath>

#include "grading/trace.h"

namespace distlm::grading {

std::vector<std::string> OverlapRunFlags(const std::string& model_type) {
  const std::string steps = "--max_steps=" + std::to_string(kOverlapSteps);
  if (model_type == "vit") return {steps, "--per_gpu_train_batch_size=8"};
  return {"--max_seq_length=512", steps, "--per_gpu_train_batch_size=4"};
}

void KeepFastestGraderRuns(OverlapTimes& into, const OverlapTimes& t) {
  into.overlapped_s = std::min(into.overlapped_s, t.overlapped_s);
  into.serial_s = std::min(into.serial_s, t.serial_s);
}

double GapShare(const OverlapTimes& t) { return (t.serial_s - t.overlapped_s) / t.overlapped_s; }

std::string LinkWords(uint64_t rate_bytes_per_s) { return Fmt("%.0f", rate_bytes_per_s * 8 / 1e6) + " Mbit/s"; }

uint64_t NextOverlapRate(const OverlapTimes& t, double bytes) {
  if (t.overlapped_s <= 0 || t.serial_s <= 0 || bytes <= 0 || t.rate_bytes_per_s == 0) return 0;
  if (GapShare(t) >= kWantedOverlapGapShare) return 0;
  const double gap = t.serial_s - t.overlapped_s;
  const double rate = static_cast<double>(t.rate_bytes_per_s);
  const double communication_s = bytes / rate;
  // Noise can make the gap negative: backward is then taken as a tenth of the communication.
  const double next = gap < 0.75 * communication_s ? bytes / std::max(gap, 0.1 * communication_s) : rate / 2;
  return static_cast<uint64_t>(std::llround(std::clamp(next, rate / 8, rate * 8)));
}

OverlapVerdict JudgeOverlap(const OverlapTimes& t, const std::string& what) {
  OverlapVerdict v;
  const std::string link = LinkWords(t.rate_bytes_per_s);
  if (t.overlapped_s <= 0 || t.serial_s <= 0) {
    v.message = "overlap not judged by time: the grader's own runs on its " + link + " link did not complete\n";
    return v;
  }
  const double gap = t.serial_s - t.overlapped_s;
  const std::string yardsticks = "the grader's own took " + Fmt("%.1f", t.overlapped_s) + " s with " + what +
                                 " during backward and " + Fmt("%.1f", t.serial_s) + " s with them after it";
  if (t.overlapped_s < kMinOverlapRunS) {
    v.message = "overlap not judged by time: on the grader's " + link + " link " + yardsticks + ", too short (under " +
                Fmt("%.0f", kMinOverlapRunS) + " s) for the updates to outweigh start-up\n";
    return v;
  }
  if (GapShare(t) < kMinOverlapGapShare) {
    v.message = "overlap not judged by time: on the grader's " + link + " link " + yardsticks +
                ", too close to tell apart on this host\n";
    return v;
  }
  v.judged = true;
  const double midpoint = t.overlapped_s + gap / 2;
  v.ok = t.submission_s > 0 && t.submission_s <= midpoint;
  const std::string yours = "on the grader's " + link + " link your run took " + Fmt("%.1f", t.submission_s) + " s; " +
                            yardsticks;
  if (v.ok) {
    v.message = yours + ": yours is the overlapped kind\n";
  } else {
    v.message = yours + ". Yours is nearer the second (over " + Fmt("%.1f", midpoint) +
                " s): the time of " + what + " was not hidden behind backward. Whatever the run logs, an update "
                "whose communication travels while backward computes takes about the longer of the two, and one "
                "that communicates after backward their sum\n";
  }
  return v;
}

OverlapVerdict JudgeOverlapRounds(const TimeOverlapRound& time_round, uint64_t rate, double bytes,
                                  const std::string& what) {
  OverlapTimes fastest;
  OverlapVerdict v;
  int rounds = 0;
  while (rounds < kOverlapMaxRounds) {
    OverlapTimes round;
    if (!time_round(rate, round, v)) return v;
    if (++rounds == 1) {
      fastest = round;
    } else {
      fastest.submission_s = std::min(fastest.submission_s, round.submission_s);
      KeepFastestGraderRuns(fastest, round);
    }
    v = JudgeOverlap(fastest, what);
    if (!v.judged || v.ok) break;
  }
  if (rounds == 1) return v;
  // The first round was judged, so the gap it showed was noise's as much as the link's: a link
  // that separates the two kinds more widely decides.
  const uint64_t next = NextOverlapRate(fastest, bytes);
  if (!v.judged && fastest.overlapped_s >= kMinOverlapRunS && next != 0) {
    OverlapTimes last;
    if (!time_round(next, last, v)) return v;
    v = JudgeOverlap(last, what);
    v.message = "(timed once more on a " + LinkWords(next) + " link: on the " + LinkWords(rate) + " link the " +
                "fastest of " + std::to_string(rounds) + " runs of each kind were too close to tell apart) " + v.message;
    return v;
  }
  v.message = "(the fastest of " + std::to_string(rounds) + " runs of each kind, timed in turn) " + v.message;
  return v;
}

}  // namespace distlm::grading
