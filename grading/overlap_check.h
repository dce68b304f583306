// Did the submission's communication overlap with its computation? Judged by time, from outside
// the processes, on a link the grader limits: on loopback that carries a fixed number of bytes a
// second (grading/jail/loopback_shaping.h), an update whose all-reduces travel during backward
// takes about the longer of the two, one that communicates after backward takes their sum. A
// process can make itself slower, never faster, and its bytes on the wire are counted by the
// kernel, so neither a forged log nor early junk on the wire shortens the run.
//
// Three kinds of run of the same layout, flags and link in one grading: the submission's, the
// grader's own with its communication overlapped, and the grader's own with it after the
// computation (StageGrading::OverlapMutantFlags). The whole run's wall time is compared: start-up
// is the same given code in all three, and the flags make the updates outweigh it. Credit when
// the submission's time is at least as close to the overlapped run's as to the other's.
//
// A busy host slows a run and never speeds one up, and a load that comes and goes slows one run
// and not the next. So the three are timed in rounds, one run of each kind after the other, and
// the fastest run of each kind is judged: a load then weighs on all three kinds alike, and each
// kind's fastest run nears its time on an idle host. The grader's own runs are timed twice before
// the first round, so that one slowed serial run cannot set the bar past a serial submission.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace distlm::grading {

// The link's first rate, 300 Mbit/s: on the tiny BERT's 4-rank layout of task 3 at these flags an
// update's all-reduces (about 13.5 MB on loopback) then take a little longer than its backward,
// so hiding them saves about a seventh of the run (measured: docs/results.md, "Overlap judged by
// time"). Where the grader's own two runs at this rate come out closer than
// kWantedOverlapGapShare (another model, a faster or slower host), the grader sets the rate once
// more from what those runs show (NextOverlapRate) and times both again.
inline constexpr uint64_t kOverlapLinkBytesPerS = 37'500'000;

// The timed runs' flags beyond the layout's: long sequences and more examples a rank, so that
// backward is long enough to hide communication behind, and kOverlapSteps updates, enough to
// outweigh start-up. A timed run must log every one of them (one that stops early is shorter).
inline constexpr size_t kOverlapSteps = 20;
std::vector<std::string> OverlapRunFlags(const std::string& model_type);

// A gap between the grader's two runs under this share of the overlapped run is not told from
// noise: overlap is then not judged (the link did not separate them on this host). Measured:
// the reference's own run lands from -0.33 to 0.36 of the way from the overlapped run to the
// serial one (credited up to 0.5), idle or beside two CPU-bound processes, on gaps of 17 to 29 %.
inline constexpr double kMinOverlapGapShare = 0.12;
// A grader's overlapped run shorter than this is not judged by: start-up, which the student's run
// pays in the jail and the grader's own does not, then weighs as much as the gap (the tiny ViT's
// 20 updates take about 3 s, and the reference's own DDP came out as slow as the serial run).
inline constexpr double kMinOverlapRunS = 8.0;
// Under this share the grader sets the link's rate again (NextOverlapRate): a wider gap leaves
// more room between an honest run's noise and the midpoint.
inline constexpr double kWantedOverlapGapShare = 0.2;

struct OverlapTimes {
  double submission_s = -1;
  double overlapped_s = -1;  // the grader's own, communication during backward
  double serial_s = -1;      // the grader's own, communication after backward
  uint64_t rate_bytes_per_s = kOverlapLinkBytesPerS;  // the link all three ran on
};

// Lowers `into`'s overlapped and serial times to `t`'s where those are faster: a busy host only
// slows a run, so each kind's fastest run stands for it.
void KeepFastestGraderRuns(OverlapTimes& into, const OverlapTimes& t);

// How far apart the grader's two runs are, as a share of the overlapped one.
double GapShare(const OverlapTimes& t);

// A link's rate in the words the verdicts use ("300 Mbit/s").
std::string LinkWords(uint64_t rate_bytes_per_s);

// The rate to time the grader's two runs at again, or 0 where `t` (at t.rate_bytes_per_s, the
// overlapped run sending `bytes` over loopback) already separates them by kWantedOverlapGapShare.
// An update takes about forward + max(backward, communication) overlapped and forward +
// backward + communication serial: the gap is about the shorter of backward and communication,
// and is widest where the two are equal. Communication took bytes / rate; a gap well under it
// says backward is shorter (about the gap), so the link is made fast enough to carry the bytes
// in that time; a gap near it says backward is the longer, of unknown length, so the link is
// halved. The rate moves by at most 8 times either way.
uint64_t NextOverlapRate(const OverlapTimes& t, double bytes);

struct OverlapVerdict {
  bool judged = false;
  bool ok = true;
  std::string message;  // the figures, and when not ok, why not credited
};

// `what`: the communication judged, in words ("its bucket all-reduces").
OverlapVerdict JudgeOverlap(const OverlapTimes& t, const std::string& what);

// Rounds timed at most on the first link. The first round's verdict stands where it credits the
// submission; one not credited is timed once more, so that one unlucky stretch of load does not
// cost an honest student the points, and judged on each kind's fastest run of the two rounds.
inline constexpr int kOverlapMaxRounds = 2;

// Times one round on the link of `rate_bytes_per_s` (the submission's run, then the grader's
// overlapped and serial runs) into `round`; false where the check ends with `stop` instead (the
// submission's run failed, or the grader's did and overlap is not judged).
using TimeOverlapRound = std::function<bool(uint64_t rate_bytes_per_s, OverlapTimes& round, OverlapVerdict& stop)>;

// The verdict on the fastest run of each kind over the rounds timed on the link of `rate`. Where
// a second round leaves the grader's fastest two runs too close to tell apart after a first that
// was judged (the gap was noise's on one side), one last round is timed on the link
// NextOverlapRate sets from them (the grader's overlapped run sends `bytes`) and judged alone:
// the first rate's runs then neither credit the submission nor refuse it.
OverlapVerdict JudgeOverlapRounds(const TimeOverlapRound& time_round, uint64_t rate, double bytes,
                                  const std::string& what);

}  // namespace distlm::grading
