// The rate limit on loopback (loopback_shaping.h), measured: in a network namespace of its own
// (root only; skips loudly elsewhere), TCP over 127.0.0.1 carries 8 MB in the time the rate
// says, within 15 %, and several times faster without the limit.
#include "grading/jail/loopback_shaping.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "grading/jail/jail.h"

namespace distlm::grading {
namespace {

constexpr size_t kBytes = 8 << 20;

// Seconds to carry kBytes from one socket to another over 127.0.0.1; < 0 on failure.
double TransferSeconds() {
  const int server = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(server, 1) != 0 ||
      getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return -1;
  }
  const auto start = std::chrono::steady_clock::now();
  std::thread sender([addr] {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) return;
    std::vector<char> chunk(1 << 16, 'x');
    for (size_t sent = 0; sent < kBytes;) {
      const ssize_t n = send(s, chunk.data(), std::min(chunk.size(), kBytes - sent), 0);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    close(s);
  });
  const int conn = accept(server, nullptr, nullptr);
  std::vector<char> buf(1 << 16);
  size_t got = 0;
  for (ssize_t n; (n = recv(conn, buf.data(), buf.size(), 0)) > 0;) got += static_cast<size_t>(n);
  sender.join();
  close(conn);
  close(server);
  if (got != kBytes) return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// In a child with a network namespace of its own: loopback up, limited to `rate` (0: not), one
// transfer. The seconds it took, or < 0 with *why.
double InFreshNamespace(uint64_t rate, std::string* why) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    double out = -1;
    int err = unshare(CLONE_NEWNET) != 0 ? errno : LoopbackUp();
    if (err == 0 && rate > 0) err = ShapeLoopback(rate);
    if (err == 0) out = TransferSeconds();
    double msg[2] = {out, static_cast<double>(err)};
    (void)!write(fds[1], msg, sizeof(msg));
    _exit(0);
  }
  close(fds[1]);
  double msg[2] = {-1, 0};
  const bool read_ok = read(fds[0], msg, sizeof(msg)) == sizeof(msg);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  if (!read_ok || msg[1] != 0) *why = std::strerror(static_cast<int>(msg[1]));
  return read_ok ? msg[0] : -1;
}

TEST(LoopbackShapingTest, TcpCarriesTheRate) {
  if (geteuid() != 0) GTEST_SKIP() << "SKIPPED: needs root (a network namespace and CAP_NET_ADMIN in it)";
  std::string why;
  const double free_s = InFreshNamespace(0, &why);
  if (free_s < 0) GTEST_SKIP() << "SKIPPED: no network namespace here: " << why;
  for (uint64_t rate : {8'000'000ULL, 32'000'000ULL}) {
    const double s = InFreshNamespace(rate, &why);
    ASSERT_GT(s, 0) << "shaping at " << rate << " B/s failed: " << why;
    const double want = static_cast<double>(kBytes) / static_cast<double>(rate);
    std::printf("8 MiB over loopback: %.3f s unlimited, %.3f s at %.0f MB/s (the rate says %.3f s)\n", free_s, s,
                rate / 1e6, want);
    EXPECT_NEAR(s, want, 0.15 * want);
    EXPECT_LT(free_s * 4, s) << "the limit made no difference";
  }
}

TEST(LoopbackShapingTest, NoRateIsRefused) { EXPECT_EQ(ShapeLoopback(0), EINVAL); }

}  // namespace
}  // namespace distlm::grading
