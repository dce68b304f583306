#include "common/train/progress.h"

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace distlm::train {
namespace {

TEST(FormatDurationTest, MinutesAndHours) {
  EXPECT_EQ(FormatDuration(7), "0:07");
  EXPECT_EQ(FormatDuration(185.4), "3:05");
  EXPECT_EQ(FormatDuration(3729), "1:02:09");
  EXPECT_EQ(FormatDuration(-1), "?");
}

TEST(FormatProgressTest, BarCountsRateElapsedAndEta) {
  EXPECT_EQ(FormatProgress("train", 20, 40, 12, 12, 95.24, "loss 0.6931", /*bar=*/true),
            "train [##########----------] 20/40  50% loss 0.6931 | 95.2 samples/s | 0:12 elapsed, ETA 0:12");
  EXPECT_EQ(FormatProgress("train", 40, 40, 24, 0, 95.24, "", /*bar=*/false),
            "train 40/40 100% | 95.2 samples/s | 0:24 elapsed");
  EXPECT_EQ(FormatProgress("eval", 3, 35, 1, -1, 0, "", /*bar=*/false), "eval  3/35   9% | 0:01 elapsed");
}

// What a ProgressLine printed, through a memory stream.
struct Captured {
  char* data = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&data, &size);
  std::string Text() {
    std::fflush(f);
    return std::string(data, size);
  }
  ~Captured() {
    std::fclose(f);
    free(data);
  }
};

TEST(ProgressLineTest, OnATerminalOneLineRedrawnThenEnded) {
  Captured c;
  {
    ProgressLine p("train", 3, /*terminal=*/true, /*every=*/50, /*enabled=*/true, 0, c.f);
    for (int i = 1; i <= 3; ++i) p.Update(i, 8 * i, "loss 0.5");
  }
  const std::string out = c.Text();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\r'), 3) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line, ended once: " << out;
  EXPECT_NE(out.find("\r\033[K"), std::string::npos) << "redrawn in place, the rest erased";
  EXPECT_NE(out.find("train [#############-------] 2/3  67% loss 0.5"), std::string::npos) << out;
  EXPECT_NE(out.find("ETA"), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\n');
}

TEST(ProgressLineTest, ElsewhereAPlainLineEveryNStepsAndAtTheEnd) {
  Captured c;
  ProgressLine p("train", 5, /*terminal=*/false, /*every=*/2, /*enabled=*/true, 0, c.f);
  for (int i = 1; i <= 5; ++i) p.Update(i, 8 * i, "");
  p.Finish();
  const std::string out = c.Text();
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;  // steps 2, 4 and 5
  EXPECT_EQ(out.rfind("train 2/5  40%", 0), 0u) << out;
  EXPECT_NE(out.find("\ntrain 5/5 100%"), std::string::npos) << out;
}

TEST(ProgressLineTest, OtherRanksPrintNothing) {
  Captured c;
  {
    ProgressLine p("train", 2, /*terminal=*/true, 1, /*enabled=*/false, 0, c.f);
    p.Update(1, 8, "");
    p.Finish();
    p.Update(2, 16, "");
  }
  EXPECT_EQ(c.Text(), "");
}

TEST(ProgressLineTest, AResumedRunEstimatesFromWhatItDidItself) {
  Captured c;
  ProgressLine p("train", 10, /*terminal=*/false, 1, /*enabled=*/true, /*first=*/5, c.f);
  p.Update(6, 8, "");
  const std::string out = c.Text();
  EXPECT_EQ(out.rfind("train  6/10  60%", 0), 0u) << out;
  EXPECT_NE(out.find("ETA"), std::string::npos) << out;
}

}  // namespace
}  // namespace distlm::train
