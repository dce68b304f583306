// tcp_probe: one TCP stream between two hosts (here: two namespaces of the emulated cluster),
// to check that a shaped link delivers the rate it was given.
//
//   tcp_probe --listen=5201                          # receiver: prints one JSON line
//   tcp_probe --connect=10.213.0.2:5201 --bytes=N    # sender
//
// The receiver times from the first byte to the end of the stream, so neither the handshake
// nor the sender's start-up counts, and prints
//   {"bytes": N, "seconds": T, "mbit_per_s": R}   (Mbit = 1e6 bits, as tc's "mbit")
// The sender retries the connection for --connect_timeout_s, since the receiver is started
// just before it in another namespace.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
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
#include "common/runtime/errors.h"

ABSL_FLAG(int, listen, 0, "receive one stream on this TCP port (all addresses) and report its rate");
ABSL_FLAG(std::string, connect, "", "send to HOST:PORT");
ABSL_FLAG(int64_t, bytes, 64 << 20, "bytes the sender sends");
ABSL_FLAG(double, connect_timeout_s, 10, "how long the sender retries connecting");

namespace {

using distlm::UserError;
using Clock = std::chrono::steady_clock;

std::string Errno() { return std::strerror(errno); }

int Receive(int port) {
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
  std::vector<char> buf(1 << 20);
  int64_t total = 0;
  Clock::time_point first, last;
  for (;;) {
    ssize_t n = read(conn, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UserError("read: " + Errno());
    if (n == 0) break;
    last = Clock::now();
    if (total == 0) first = last;
    total += n;
  }
  close(conn);
  close(listener);
  const double seconds = std::chrono::duration<double>(last - first).count();
  std::printf("{\"bytes\": %lld, \"seconds\": %.6f, \"mbit_per_s\": %.3f}\n", static_cast<long long>(total),
              seconds, seconds > 0 ? total * 8.0 / seconds / 1e6 : 0.0);
  return total > 0 ? 0 : 1;
}

int Send(const std::string& target, int64_t bytes, double timeout_s) {
  const size_t colon = target.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(target.substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    throw UserError("--connect must be HOST:PORT, got '" + target + "'");
  }
  if (bytes < 1) throw UserError(absl::StrCat("--bytes must be positive, got ", bytes));
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
  std::vector<char> buf(1 << 20, 'x');
  int64_t sent = 0;
  while (sent < bytes) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(bytes - sent, buf.size()));
    ssize_t n = write(fd, buf.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UserError(absl::StrCat("write to ", target, " after ", sent, " bytes: ", Errno()));
    sent += n;
  }
  close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "one TCP stream, timed at the receiver.\n"
      "usage: tcp_probe --listen=PORT | tcp_probe --connect=HOST:PORT [--bytes=N]");
  return distlm::RunMain([&] {
    absl::ParseCommandLine(argc, argv);
    const int port = absl::GetFlag(FLAGS_listen);
    const std::string target = absl::GetFlag(FLAGS_connect);
    if ((port != 0) == !target.empty()) throw UserError("give exactly one of --listen=PORT and --connect=HOST:PORT");
    return port != 0 ? Receive(port) : Send(target, absl::GetFlag(FLAGS_bytes), absl::GetFlag(FLAGS_connect_timeout_s));
  });
}
