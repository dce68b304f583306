// tcp_probe: one TCP connection between two hosts (here: two namespaces of the emulated
// cluster), to check that a shaped link delivers the rate and the delay it was given.
//
//   tcp_probe --listen=5201 [--skip_s=S]              # receiver: prints one JSON line
//   tcp_probe --connect=10.213.0.2:5201 --bytes=N     # sender (or --seconds=S: for S seconds)
//   tcp_probe --listen=5201 --rtt                     # echoes 64-byte requests
//   tcp_probe --connect=10.213.0.2:5201 --rtt [--samples=20]   # times them: one JSON line
//
// Rate: the receiver times from the first byte to the end of the stream, so neither the
// handshake nor the sender's start-up counts, and prints
//   {"bytes": N, "seconds": T, "mbit_per_s": R}   (Mbit = 1e6 bits, as tc's "mbit")
// With --skip_s it adds "steady_from_s" and "steady_mbit_per_s": the rate from the first read
// at least S seconds after the first byte. Over a long delay a stream spends its first seconds
// growing its window (slow start, then the congestion controller's probing), and only the
// steady state says whether the link gives its rate.
// Round trip: the client sends --samples 64-byte requests one at a time over one connection
// (TCP_NODELAY on both ends), each answered by 64 bytes, after 3 that warm the connection up,
// and prints {"samples": N, "median_ms": M, "min_ms": A, "max_ms": B}.
// The connecting side retries for --connect_timeout_s, since the listener is started just
// before it in another namespace.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/runtime/errors.h"

ABSL_FLAG(int, listen, 0, "receive one stream on this TCP port (all addresses) and report its rate");
ABSL_FLAG(std::string, connect, "", "send to HOST:PORT");
ABSL_FLAG(int64_t, bytes, 64 << 20, "bytes the sender sends");
ABSL_FLAG(double, seconds, 0, "if > 0, the sender sends for this long instead of --bytes");
ABSL_FLAG(double, skip_s, 0, "the receiver also reports the rate after the stream's first S seconds");
ABSL_FLAG(bool, rtt, false, "measure request/response round trips instead of a stream (both ends)");
ABSL_FLAG(int, samples, 20, "round trips the --rtt client times (the median is reported)");
ABSL_FLAG(double, connect_timeout_s, 10, "how long the sender retries connecting");

namespace {

using distlm::UserError;
using Clock = std::chrono::steady_clock;

std::string Errno() { return std::strerror(errno); }

constexpr size_t kRttMessage = 64;

// Accepts one connection on port (all addresses).
int AcceptOne(int port) {
  if (port < 1 || port > 65535) throw UserError(absl::StrCat("--listen must be a port in 1..65535, got ", port));
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) throw UserError("socket: " + Errno());
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw UserError(absl::StrCat("cannot bind --listen=", port, ": ", Errno()));
  }
  if (listen(listener, 1) != 0) throw UserError("listen: " + Errno());
  int conn = accept(listener, nullptr, nullptr);
  if (conn < 0) throw UserError("accept: " + Errno());
  close(listener);
  return conn;
}

// Reads exactly n bytes; false at the end of the stream before the first of them.
bool ReadExactly(int fd, char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw UserError("read: " + Errno());
    if (r == 0) {
      if (got == 0) return false;
      throw UserError(absl::StrCat("the stream ended inside a ", n, "-byte message"));
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

void WriteAll(int fd, const char* buf, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, buf, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw UserError("write: " + Errno());
    buf += w;
    n -= static_cast<size_t>(w);
  }
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int Receive(int port, double skip_s) {
  if (skip_s < 0) throw UserError(absl::StrCat("--skip_s must be >= 0, got ", skip_s));
  const int conn = AcceptOne(port);
  std::vector<char> buf(1 << 20);
  int64_t total = 0, steady_from_bytes = -1;
  Clock::time_point first, last, steady_from;
  for (;;) {
    ssize_t n = read(conn, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UserError("read: " + Errno());
    if (n == 0) break;
    last = Clock::now();
    if (total == 0) first = last;
    // The steady rate counts what arrives after this read, from this read's time.
    if (skip_s > 0 && steady_from_bytes < 0 && std::chrono::duration<double>(last - first).count() >= skip_s) {
      steady_from = last;
      steady_from_bytes = total + n;
    }
    total += n;
  }
  close(conn);
  const double seconds = std::chrono::duration<double>(last - first).count();
  std::string steady;
  if (skip_s > 0) {
    const double steady_s = std::chrono::duration<double>(last - steady_from).count();
    if (steady_from_bytes < 0 || steady_s <= 0) {
      throw UserError(absl::StrCat("the stream lasted ", seconds, " s, not beyond --skip_s=", skip_s));
    }
    steady = absl::StrFormat(", \"steady_from_s\": %.3f, \"steady_mbit_per_s\": %.3f",
                             std::chrono::duration<double>(steady_from - first).count(),
                             (total - steady_from_bytes) * 8.0 / steady_s / 1e6);
  }
  std::printf("{\"bytes\": %lld, \"seconds\": %.6f, \"mbit_per_s\": %.3f%s}\n", static_cast<long long>(total),
              seconds, seconds > 0 ? total * 8.0 / seconds / 1e6 : 0.0, steady.c_str());
  return total > 0 ? 0 : 1;
}

// Answers every 64-byte request with 64 bytes until the client closes the connection.
int Echo(int port) {
  const int conn = AcceptOne(port);
  NoDelay(conn);
  char buf[kRttMessage];
  while (ReadExactly(conn, buf, sizeof(buf))) WriteAll(conn, buf, sizeof(buf));
  close(conn);
  return 0;
}

// Connects to HOST:PORT, retrying until timeout_s (the listener may not be up yet).
int Connect(const std::string& target, double timeout_s) {
  const size_t colon = target.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(target.substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    throw UserError("--connect must be HOST:PORT, got '" + target + "'");
  }
  const std::string host = target.substr(0, colon);
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    throw UserError("--connect: cannot resolve '" + host + "'");
  }
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(found->ai_addr);
  freeaddrinfo(found);
  addr.sin_port = htons(static_cast<uint16_t>(port));

  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int fd = -1;
  for (;;) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw UserError("socket: " + Errno());
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) break;
    const std::string why = Errno();
    close(fd);
    if (Clock::now() > deadline) {
      throw UserError(absl::StrCat("cannot connect to ", target, " within ", timeout_s, " s: ", why));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return fd;
}

int Send(const std::string& target, int64_t bytes, double seconds, double timeout_s) {
  if (bytes < 1) throw UserError(absl::StrCat("--bytes must be positive, got ", bytes));
  if (seconds < 0) throw UserError(absl::StrCat("--seconds must be >= 0, got ", seconds));
  const int fd = Connect(target, timeout_s);
  std::vector<char> buf(1 << 20, 'x');
  int64_t sent = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (seconds > 0 ? Clock::now() < end : sent < bytes) {
    const size_t want =
        seconds > 0 ? buf.size() : static_cast<size_t>(std::min<int64_t>(bytes - sent, buf.size()));
    ssize_t n = write(fd, buf.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UserError(absl::StrCat("write to ", target, " after ", sent, " bytes: ", Errno()));
    sent += n;
  }
  close(fd);
  return 0;
}

int TimeRoundTrips(const std::string& target, int samples, double timeout_s) {
  if (samples < 1) throw UserError(absl::StrCat("--samples must be positive, got ", samples));
  const int fd = Connect(target, timeout_s);
  NoDelay(fd);
  char buf[kRttMessage];
  std::memset(buf, 'x', sizeof(buf));
  std::vector<double> ms;
  for (int i = -3; i < samples; i++) {  // the first 3: the connection's first data, not timed
    const auto t0 = Clock::now();
    WriteAll(fd, buf, sizeof(buf));
    if (!ReadExactly(fd, buf, sizeof(buf))) throw UserError("the echo side closed the connection");
    if (i >= 0) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  close(fd);
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  const double median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  std::printf("{\"samples\": %zu, \"median_ms\": %.3f, \"min_ms\": %.3f, \"max_ms\": %.3f}\n", n, median,
              ms.front(), ms.back());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "one TCP stream timed at the receiver, or request/response round trips timed at the client.\n"
      "usage: tcp_probe --listen=PORT [--skip_s=S] | tcp_probe --connect=HOST:PORT [--bytes=N | --seconds=S]\n"
      "       tcp_probe --listen=PORT --rtt | tcp_probe --connect=HOST:PORT --rtt [--samples=20]");
  return distlm::RunMain([&] {
    absl::ParseCommandLine(argc, argv);
    const int port = absl::GetFlag(FLAGS_listen);
    const std::string target = absl::GetFlag(FLAGS_connect);
    if ((port != 0) == !target.empty()) throw UserError("give exactly one of --listen=PORT and --connect=HOST:PORT");
    const double timeout_s = absl::GetFlag(FLAGS_connect_timeout_s);
    if (absl::GetFlag(FLAGS_rtt)) {
      return port != 0 ? Echo(port) : TimeRoundTrips(target, absl::GetFlag(FLAGS_samples), timeout_s);
    }
    if (port != 0) return Receive(port, absl::GetFlag(FLAGS_skip_s));
    return Send(target, absl::GetFlag(FLAGS_bytes), absl::GetFlag(FLAGS_seconds), timeout_s);
  });
}
