#include "task4_bench/traffic.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/runtime/errors.h"

namespace distlm::task4_bench {
namespace {

using ::testing::HasSubstr;

// Hand-computed: 2 * (N-1) / N * S.
TEST(RingAllreduceTest, MatchesHandComputedValues) {
  struct Case {
    double bytes;
    int n;
    double each_way;
  } cases[] = {
      {1000, 2, 1000},            // 2 * 1/2 * 1000
      {1000, 4, 1500},            // 2 * 3/4 * 1000
      {8388608, 8, 14680064},     // 2 * 7/8 * 8 MiB = 14 MiB
      {440000000, 4, 660000000},  // BERT-base's fp32 gradients (110 M params) at 4 ranks
      {4096, 1, 0},               // one rank talks to nobody
      {0, 4, 0},
  };
  for (const Case& c : cases) {
    Traffic t = ExpectedRingAllreduceBytesPerRank(c.bytes, c.n);
    EXPECT_DOUBLE_EQ(t.sent_bytes, c.each_way) << c.bytes << " bytes, N=" << c.n;
    EXPECT_DOUBLE_EQ(t.received_bytes, c.each_way) << c.bytes << " bytes, N=" << c.n;
  }
}

// A second derivation: simulate the ring's 2(N-1) steps with integer chunk sizes (the first
// S mod N chunks one byte larger) and add up what each rank sends.
TEST(RingAllreduceTest, AgreesWithAStepByStepRingWhenNDividesTheBuffer) {
  for (int n : {2, 3, 4, 5, 8}) {
    const int64_t bytes = 1200;  // divisible by 2, 3, 4, 5 and 8
    std::vector<int64_t> chunk(n, bytes / n);
    std::vector<int64_t> sent(n, 0), received(n, 0);
    for (int phase = 0; phase < 2; ++phase) {
      for (int step = 0; step < n - 1; ++step) {
        for (int r = 0; r < n; ++r) {
          // In step s of either phase rank r sends chunk (r - s) mod N to rank r + 1.
          const int c = ((r - step) % n + n) % n;
          sent[r] += chunk[c];
          received[(r + 1) % n] += chunk[c];
        }
      }
    }
    Traffic t = ExpectedRingAllreduceBytesPerRank(bytes, n);
    for (int r = 0; r < n; ++r) {
      EXPECT_DOUBLE_EQ(t.sent_bytes, sent[r]) << "N=" << n << " rank " << r;
      EXPECT_DOUBLE_EQ(t.received_bytes, received[r]) << "N=" << n << " rank " << r;
    }
  }
}

TEST(GatherScatterTest, RootCarriesNMinusOneBuffersEachWay) {
  // S = 100 bytes, N = 4, root 0: the root gets three buffers and sends three averages.
  Traffic root = ExpectedGatherScatterBytes(100, 4, 0);
  EXPECT_DOUBLE_EQ(root.sent_bytes, 300);
  EXPECT_DOUBLE_EQ(root.received_bytes, 300);
  for (int r = 1; r < 4; ++r) {
    Traffic t = ExpectedGatherScatterBytes(100, 4, r);
    EXPECT_DOUBLE_EQ(t.sent_bytes, 100) << "rank " << r;
    EXPECT_DOUBLE_EQ(t.received_bytes, 100) << "rank " << r;
  }
  // Another root: rank 2 of 8 with 440 MB (BERT-base's gradients) moves 7 x 440 MB each way.
  EXPECT_DOUBLE_EQ(ExpectedGatherScatterBytes(440e6, 8, 2, /*root=*/2).received_bytes, 3080e6);
  EXPECT_DOUBLE_EQ(ExpectedGatherScatterBytes(440e6, 8, 0, /*root=*/2).sent_bytes, 440e6);
  // One rank: nothing leaves the process.
  EXPECT_DOUBLE_EQ(ExpectedGatherScatterBytes(100, 1, 0).sent_bytes, 0);
  EXPECT_DOUBLE_EQ(ExpectedGatherScatterBytes(100, 1, 0).received_bytes, 0);
}

// Every byte sent is received by someone: the totals over ranks must match, for both patterns.
TEST(TrafficTest, WhatRanksSendIsWhatRanksReceive) {
  for (int n = 1; n <= 6; ++n) {
    double gs_sent = 0, gs_received = 0;
    for (int r = 0; r < n; ++r) {
      Traffic t = ExpectedGatherScatterBytes(64, n, r, /*root=*/n - 1);
      gs_sent += t.sent_bytes;
      gs_received += t.received_bytes;
    }
    EXPECT_DOUBLE_EQ(gs_sent, gs_received) << "N=" << n;
    EXPECT_DOUBLE_EQ(gs_sent, 2.0 * (n - 1) * 64) << "N=" << n;  // (N-1) gathers + (N-1) scatters
  }
}

TEST(TrafficTest, RejectsImpossibleArguments) {
  EXPECT_THROW(ExpectedRingAllreduceBytesPerRank(-1, 2), UserError);
  EXPECT_THROW(ExpectedRingAllreduceBytesPerRank(10, 0), UserError);
  EXPECT_THROW(ExpectedGatherScatterBytes(10, 4, 4), UserError);
  EXPECT_THROW(ExpectedGatherScatterBytes(10, 4, -1), UserError);
  EXPECT_THROW(ExpectedGatherScatterBytes(10, 4, 0, /*root=*/7), UserError);
  try {
    ExpectedGatherScatterBytes(10, 4, 0, 7);
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("root 7 is outside 0..3"));
  }
}

// nccl-tests' table (doc/PERFORMANCE.md) at N = 2, 4 and 8, and our gather+scatter's N - 1.
TEST(BusBandwidthTest, FactorsMatchNcclTestsDefinitions) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllGather, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kBroadcast, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kGatherScatter, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kGatherScatter, 4), 3.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllReduce, 1), 0.0);
  EXPECT_THROW(BusBandwidthFactor(Collective::kBroadcast, 0), UserError);
}

// The bus factor is meant to be the busiest rank's bytes sent per byte of S: check that it
// agrees with the traffic formulas, which were derived separately.
TEST(BusBandwidthTest, EqualsTheBusiestRanksTrafficPerByte) {
  for (int n = 2; n <= 8; ++n) {
    EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllReduce, n),
                     ExpectedRingAllreduceBytesPerRank(1000, n).sent_bytes / 1000);
    EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kGatherScatter, n),
                     ExpectedGatherScatterBytes(1000, n, 0).sent_bytes / 1000);
  }
}

TEST(BusBandwidthTest, Names) {
  EXPECT_EQ(CollectiveName(Collective::kAllReduce), "all_reduce");
  EXPECT_EQ(CollectiveName(Collective::kAllGather), "all_gather");
  EXPECT_EQ(CollectiveName(Collective::kBroadcast), "broadcast");
  EXPECT_EQ(CollectiveName(Collective::kGatherScatter), "gather_scatter");
}

// Typed by hand in the kernel's format (net/core/net-procfs.c: dev_seq_printf_stats).
constexpr char kProcNetDev[] =
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls "
    "carrier compressed\n"
    "    lo: 1596312639  279708    0    0    0     0          0         0 1596312639  279708    0    0    0     0 "
    "      0          0\n"
    "  eth0: 987654321 12345    1    2    0     0          0         7 123456789 54321    0    0    0     0 "
    "      0          0\n"
    "distlm0:42 3 0 0 0 0 0 0 84 6 0 0 0 0 0 0\n";

TEST(InterfaceCountersTest, ParsesTheKernelsFormat) {
  InterfaceCounters eth = ParseInterfaceCounters(kProcNetDev, "eth0");
  EXPECT_EQ(eth.rx_bytes, 987654321u);
  EXPECT_EQ(eth.rx_packets, 12345u);
  EXPECT_EQ(eth.tx_bytes, 123456789u);
  EXPECT_EQ(eth.tx_packets, 54321u);
  InterfaceCounters lo = ParseInterfaceCounters(kProcNetDev, "lo");
  EXPECT_EQ(lo.rx_bytes, 1596312639u);
  EXPECT_EQ(lo.tx_packets, 279708u);
  // Old kernels print no space after the colon once the name is long.
  InterfaceCounters glued = ParseInterfaceCounters(kProcNetDev, "distlm0");
  EXPECT_EQ(glued.rx_bytes, 42u);
  EXPECT_EQ(glued.rx_packets, 3u);
  EXPECT_EQ(glued.tx_bytes, 84u);
  EXPECT_EQ(glued.tx_packets, 6u);
}

TEST(InterfaceCountersTest, NamesWhatIsWrong) {
  try {
    ParseInterfaceCounters(kProcNetDev, "wlan0", "net_dev.txt");
    FAIL() << "no error for a missing interface";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no interface 'wlan0' in net_dev.txt"));
    EXPECT_THAT(e.what(), HasSubstr("lo, eth0, distlm0"));
  }
  std::string bad = std::string(kProcNetDev) + "  eth1: 1 2 3 x 5 6 7 8 9 10 11 12 13 14 15 16\n";
  try {
    ParseInterfaceCounters(bad, "eth1", "net_dev.txt");
    FAIL() << "no error for a non-numeric counter";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("net_dev.txt line 6: counter 4 of interface eth1 is 'x'"));
  }
  std::string short_line = std::string(kProcNetDev) + "  eth2: 1 2 3\n";
  EXPECT_THROW(ParseInterfaceCounters(short_line, "eth2"), UserError);
  std::string no_colon = std::string(kProcNetDev) + "garbage\n";
  EXPECT_THROW(ParseInterfaceCounters(no_colon, "lo"), UserError);
  EXPECT_THROW(ReadInterfaceCounters("distlm-none9"), UserError);
}

// The real file: send N bytes through a TCP connection on 127.0.0.1 and watch lo's counters
// grow by at least N (payload; headers, the handshake and ACKs come on top) each way.
TEST(InterfaceCountersTest, LoopbackCountersGrowByWhatIsSent) {
  constexpr size_t kBytes = 3 << 20;
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);

  const InterfaceCounters before = ReadInterfaceCounters("lo");
  size_t received = 0;
  std::thread reader([&] {
    int conn = accept(listener, nullptr, nullptr);
    if (conn < 0) return;
    std::vector<char> buf(1 << 16);
    ssize_t n;
    while ((n = read(conn, buf.data(), buf.size())) > 0) received += n;
    close(conn);
  });
  int sender = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(sender, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::vector<char> payload(kBytes, 'x');
  size_t written = 0;
  while (written < kBytes) {
    ssize_t n = write(sender, payload.data() + written, kBytes - written);
    ASSERT_GT(n, 0);
    written += n;
  }
  close(sender);
  reader.join();
  close(listener);
  ASSERT_EQ(received, kBytes);
  const InterfaceCounters after = ReadInterfaceCounters("lo");

  // Loopback counts every packet once as sent and once as received.
  EXPECT_GE(after.tx_bytes - before.tx_bytes, kBytes);
  EXPECT_GE(after.rx_bytes - before.rx_bytes, kBytes);
  // At least one packet per 64 KiB (lo's largest segment) plus the handshake.
  EXPECT_GE(after.tx_packets - before.tx_packets, kBytes / 65536 + 3);
}

}  // namespace
}  // namespace distlm::task4_bench
