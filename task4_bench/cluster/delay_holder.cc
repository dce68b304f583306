// delay_holder: one-way packet delay for the emulated cluster on kernels without netem.
//
// emulated_cluster.sh puts one iptables rule in every node's namespace,
//   iptables -t raw -A PREROUTING -i distlm0 -j NFQUEUE --queue-num 0
// and starts one holder in the host namespace:
//   delay_holder --delay_us=20000 --netns=distlm-ns0,distlm-ns1 --rt
// Every packet a node receives is handed to this program, which holds it for --delay_us after
// the kernel received it and then accepts it: one way between two nodes takes the delay, a round
// trip twice that, as with netem on the senders.
//
// Why the receiver's PREROUTING and not the sender's OUTPUT: a packet held on the sender still
// counts against its socket (TCP small queues), so one stream could not keep more than a few
// packets in flight (2.3 Mbit/s at 20 ms). Held on the receiver, it has left the sender's
// accounting, as it would have on a real wire.
//
// Scheduling: every packet of a queue gets the same delay, so packets become due in the order
// they arrived. A FIFO of (packet id, due time) is then the whole schedule, and one batch verdict
// ("accept every packet up to id X") releases everything due, in order.
//
// One thread per --netns (a name under /run/netns; none: the holder's own namespace). Each
// thread joins its namespace with setns() and binds queue --queue there (queue numbers are per
// namespace), so one process in the host namespace serves every node without being one of the
// nodes' processes (the cluster's teardown signals those).
//
// Signals: SIGTERM (and SIGINT, unless it was ignored when the holder started) accept every
// held packet at once, print the statistics to stderr and exit 0. SIGUSR1 prints the statistics.
// stderr gets one "delay_holder: ready: ..." line once every queue is bound: the rules that
// send packets here must not come before it, since a queue nobody has bound drops its packets.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/runtime/errors.h"

extern "C" {
#include <libnetfilter_queue/libnetfilter_queue.h>
}

ABSL_FLAG(int64_t, delay_us, -1, "how long every packet is held, in microseconds (required)");
ABSL_FLAG(std::vector<std::string>, netns, {},
          "comma-separated network namespaces (names under /run/netns) to serve, one thread each; "
          "empty: the holder's own");
ABSL_FLAG(int, queue, 0, "NFQUEUE number the iptables rules send to (0..65535)");
ABSL_FLAG(int64_t, maxlen, 200000, "packets a queue may hold; beyond it the kernel drops, as a full link would");
ABSL_FLAG(bool, rt, false, "run the threads SCHED_FIFO, so a busy machine does not add its scheduling delay");
ABSL_FLAG(int64_t, max_advance_us, 300, "the most the timer may be advanced to hide wake-up latency (0: never)");

namespace {

using distlm::UserError;

int64_t NowNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

struct Held {
  uint32_t id;
  uint32_t bytes;
  int64_t due_ns;  // CLOCK_MONOTONIC
};

struct Queue {
  std::string netns;  // "": the namespace the holder started in
  int num = 0;
  int64_t delay_ns = 0;
  uint32_t maxlen = 0;
  nfq_handle* h = nullptr;
  nfq_q_handle* qh = nullptr;
  std::deque<Held> held;
  uint64_t held_bytes = 0;
  // The moment the batch being parsed was read, on both clocks: the due times are monotonic, the
  // kernel's receive stamps are CLOCK_REALTIME.
  int64_t read_mono_ns = 0;
  int64_t read_real_ns = 0;
  // Timer advance: the thread sleeps until (head's due time - advance) and releases what is due
  // by then plus the advance. The advance follows the measured wake-up lateness, so that on
  // average packets leave at their due time rather than one wake-up latency after it.
  int64_t advance_ns = 0;
  int64_t max_advance_ns = 0;
  // Statistics (read racily by SIGUSR1's report; good enough for counters).
  uint64_t packets = 0, bytes = 0, gso_packets = 0, stamped = 0, max_held_packets = 0, max_held_bytes = 0;
  uint64_t late_releases = 0, enobufs = 0, verdict_errors = 0;
  int64_t max_stamp_age_ns = 0, max_lateness_ns = 0;
  double sum_lateness_ns = 0;  // early releases count negative
};

std::string Name(const Queue& q) { return absl::StrCat("netns=", q.netns.empty() ? "-" : q.netns, " queue=", q.num); }

int OnPacket(nfq_q_handle*, nfgenmsg*, nfq_data* nfa, void* data) {
  auto* q = static_cast<Queue*>(data);
  const nfqnl_msg_packet_hdr* ph = nfq_get_msg_packet_hdr(nfa);
  if (ph == nullptr) return 0;
  // Only the IP header is copied (see Open); its length field gives the packet's size.
  uint32_t bytes = 0;
  unsigned char* payload = nullptr;
  if (nfq_get_payload(nfa, &payload) >= 20 && (payload[0] >> 4) == 4) {
    bytes = ntohs(reinterpret_cast<const iphdr*>(payload)->tot_len);
  }
  // The packet arrived before the holder read it. With the kernel's receive stamp the delay
  // counts from the arrival, so the holder's own wake-up latency is not added to it.
  int64_t age_ns = 0;
  timeval tv{};
  if (nfq_get_timestamp(nfa, &tv) == 0) {
    const int64_t age = q->read_real_ns - (int64_t{tv.tv_sec} * 1000000000 + int64_t{tv.tv_usec} * 1000);
    if (age >= 0 && age < 1000000000) {  // else not a receive stamp (a clock step, a departure time)
      age_ns = age;
      q->stamped++;
      q->max_stamp_age_ns = std::max(q->max_stamp_age_ns, age);
    }
  }
  q->held.push_back(Held{ntohl(ph->packet_id), bytes, q->read_mono_ns - age_ns + q->delay_ns});
  q->held_bytes += bytes;
  q->packets++;
  q->bytes += bytes;
  if (bytes > 1500) q->gso_packets++;
  q->max_held_packets = std::max<uint64_t>(q->max_held_packets, q->held.size());
  q->max_held_bytes = std::max(q->max_held_bytes, q->held_bytes);
  return 0;
}

// Accepts, in one batch verdict, every held packet due by now_ns (every one if flush). timed:
// this call follows a sleep timed for the head packet, so its lateness tunes the advance.
void Release(Queue* q, int64_t now_ns, bool flush, bool timed) {
  if (timed && !q->held.empty() && q->max_advance_ns > 0) {
    const int64_t error = now_ns - q->held.front().due_ns;  // > 0: woke up late
    q->advance_ns = std::clamp<int64_t>(q->advance_ns + error / 8, 0, q->max_advance_ns);
  }
  size_t n = 0;
  while (n < q->held.size() && (flush || q->held[n].due_ns - q->advance_ns <= now_ns)) {
    const int64_t late = now_ns - q->held[n].due_ns;
    q->sum_lateness_ns += static_cast<double>(late);
    q->max_lateness_ns = std::max(q->max_lateness_ns, late);
    if (late > 200000) q->late_releases++;
    q->held_bytes -= q->held[n].bytes;
    n++;
  }
  if (n == 0) return;
  if (nfq_set_verdict_batch(q->qh, q->held[n - 1].id, NF_ACCEPT) < 0) q->verdict_errors++;
  q->held.erase(q->held.begin(), q->held.begin() + static_cast<std::ptrdiff_t>(n));
}

void Report(const Queue& q) {
  std::fprintf(stderr,
               "delay_holder: %s delay_us=%" PRId64 " packets=%" PRIu64 " bytes=%" PRIu64 " gso_packets=%" PRIu64
               " stamped=%" PRIu64 " max_stamp_age_us=%.1f max_held_packets=%" PRIu64 " max_held_bytes=%" PRIu64
               " mean_late_us=%.1f late_over_200us=%" PRIu64 " max_late_us=%.1f advance_us=%.1f enobufs=%" PRIu64
               " verdict_errors=%" PRIu64 "\n",
               Name(q).c_str(), q.delay_ns / 1000, q.packets, q.bytes, q.gso_packets, q.stamped,
               q.max_stamp_age_ns / 1e3, q.max_held_packets, q.max_held_bytes,
               q.packets ? q.sum_lateness_ns / 1e3 / static_cast<double>(q.packets) : 0.0, q.late_releases,
               q.max_lateness_ns / 1e3, q.advance_ns / 1e3, q.enobufs, q.verdict_errors);
}

// Binds q's queue in q->netns, from the calling thread (setns changes that thread only).
// Returns "" or what failed.
std::string Open(Queue* q) {
  auto failed = [q](const std::string& what) { return absl::StrCat(Name(*q), ": ", what, ": ", std::strerror(errno)); };
  if (!q->netns.empty()) {
    const std::string path = "/run/netns/" + q->netns;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return failed("open " + path);
    const int rc = setns(fd, CLONE_NEWNET);
    close(fd);
    if (rc != 0) return failed("setns");
  }
  q->h = nfq_open();
  if (q->h == nullptr) return failed("nfq_open (needs root and the kernel's nfnetlink_queue)");
  q->qh = nfq_create_queue(q->h, static_cast<uint16_t>(q->num), &OnPacket, q);
  if (q->qh == nullptr) return failed("nfq_create_queue (is another program bound to this queue?)");
  // The first 20 bytes (the IP header) are all the holder reads: it never changes a packet.
  if (nfq_set_mode(q->qh, NFQNL_COPY_PACKET, 20) < 0) return failed("nfq_set_mode");
  if (nfq_set_queue_maxlen(q->qh, q->maxlen) < 0) return failed("nfq_set_queue_maxlen");
  // GSO packets whole: segmenting them for the queue would cost the CPU the links' rates need.
  // No fail-open: a full queue drops, as a full link would, rather than passing packets undelayed.
  if (nfq_set_queue_flags(q->qh, NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_GSO) < 0) {
    return failed("nfq_set_queue_flags");
  }
  // A packet whose message the socket has no room for is dropped (no fail-open): so a large
  // buffer (root may go beyond net.core.rmem_max). Such drops are counted in the namespace's
  // /proc/net/netfilter/nfnetlink_queue; ENOBUFS would only interrupt the reads.
  const int fd = nfq_fd(q->h);
  int size = 64 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0) return failed("SO_RCVBUFFORCE");
  int one = 1;
  setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));
  return "";
}

std::atomic<bool> g_stop{false};
std::mutex g_error_mu;
std::string g_error;  // the first thread's failure, under g_error_mu

void Fail(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_error_mu);
  if (g_error.empty()) g_error = what;
  g_stop = true;
}

void Loop(Queue* q) {
  const int fd = nfq_fd(q->h);
  std::vector<char> buf(1 << 20);
  bool timed = false;
  while (!g_stop.load(std::memory_order_relaxed)) {
    const int64_t now = NowNs(CLOCK_MONOTONIC);
    Release(q, now, false, timed);
    timed = false;
    timespec timeout{0, 200000000};  // wake now and then to see the stop flag
    bool for_head = false;
    if (!q->held.empty()) {
      const int64_t wait = q->held.front().due_ns - q->advance_ns - now;
      if (wait < timeout.tv_nsec) {
        timeout.tv_nsec = std::max<int64_t>(wait, 0);
        for_head = wait > 0;
      }
    }
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ppoll(&pfd, 1, &timeout, nullptr);
    if (ready < 0 && errno != EINTR) {
      Fail(absl::StrCat(Name(*q), ": ppoll: ", std::strerror(errno)));
      break;
    }
    if (ready == 0) timed = for_head;
    if (ready <= 0) continue;
    // Drain what is there; every message of one read gets that read's time.
    for (int i = 0; i < 64; i++) {
      const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0) {
        if (errno == ENOBUFS) {
          q->enobufs++;
          continue;
        }
        if (errno == EAGAIN || errno == EINTR) break;
        Fail(absl::StrCat(Name(*q), ": recv: ", std::strerror(errno)));
        break;
      }
      q->read_mono_ns = NowNs(CLOCK_MONOTONIC);
      q->read_real_ns = NowNs(CLOCK_REALTIME);
      nfq_handle_packet(q->h, buf.data(), static_cast<int>(n));
    }
  }
  Release(q, NowNs(CLOCK_MONOTONIC), /*flush=*/true, /*timed=*/false);
  nfq_destroy_queue(q->qh);
  nfq_close(q->h);
}

int Run(const std::vector<char*>& rest) {
  if (rest.size() > 1) throw UserError(absl::StrCat("delay_holder: unexpected argument '", rest[1], "'"));
  const int64_t delay_us = absl::GetFlag(FLAGS_delay_us);
  const int queue_num = absl::GetFlag(FLAGS_queue);
  const int64_t maxlen = absl::GetFlag(FLAGS_maxlen);
  const int64_t max_advance_us = absl::GetFlag(FLAGS_max_advance_us);
  std::vector<std::string> namespaces = absl::GetFlag(FLAGS_netns);
  if (delay_us < 0 || delay_us > 60000000) {
    throw UserError("delay_holder: --delay_us=US is required, in 0..60000000 (a minute)");
  }
  if (queue_num < 0 || queue_num > 65535) throw UserError(absl::StrCat("delay_holder: --queue must be in 0..65535, got ", queue_num));
  if (maxlen < 1 || maxlen > UINT32_MAX) throw UserError(absl::StrCat("delay_holder: --maxlen must be positive, got ", maxlen));
  if (max_advance_us < 0) throw UserError(absl::StrCat("delay_holder: --max_advance_us must be >= 0, got ", max_advance_us));
  for (const std::string& ns : namespaces) {
    if (ns.empty() || ns.find('/') != std::string::npos || ns == "." || ns == "..") {
      throw UserError(absl::StrCat("delay_holder: --netns takes names under /run/netns, got '", ns, "'"));
    }
  }
  if (namespaces.empty()) namespaces.emplace_back("");

  // A socket that asks for receive timestamps turns on the kernel's stamping of every received
  // packet (it is global), which NFQUEUE then passes on. It stays open for the holder's life.
  const int stamp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int on = 1;
  if (stamp_fd < 0 || setsockopt(stamp_fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) != 0) {
    std::fprintf(stderr, "delay_holder: no receive timestamps (%s): delays count from the holder's reads\n",
                 std::strerror(errno));
  }
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // timeouts to the nanosecond; the threads inherit it
  if (absl::GetFlag(FLAGS_rt)) {
    sched_param p{};
    p.sched_priority = 10;
    if (sched_setscheduler(0, SCHED_FIFO, &p) != 0) {
      std::fprintf(stderr, "delay_holder: SCHED_FIFO: %s (going on without)\n", std::strerror(errno));
    }
  }
  // The signals are taken by the main thread with sigtimedwait; the threads inherit the mask.
  // An ignored SIGINT stays ignored (a background job's, which a Ctrl-C meant for its parent).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  struct sigaction old_int{};
  if (sigaction(SIGINT, nullptr, &old_int) == 0 && old_int.sa_handler != SIG_IGN) sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  std::vector<Queue> queues(namespaces.size());
  for (size_t i = 0; i < queues.size(); i++) {
    Queue& q = queues[i];
    q.netns = namespaces[i];
    q.num = queue_num;
    q.delay_ns = delay_us * 1000;
    q.maxlen = static_cast<uint32_t>(maxlen);
    // At most a quarter of the delay, so that the advance never reorders anything visible.
    q.max_advance_ns = std::min(max_advance_us * 1000, q.delay_ns / 4);
    q.advance_ns = std::min<int64_t>(50000, q.max_advance_ns);  // a typical wake-up latency to start from
  }
  // Each queue is bound by its own thread (setns is per thread); a failure stops the start.
  std::atomic<size_t> opened{0};
  std::vector<std::thread> threads;
  for (Queue& q : queues) {
    threads.emplace_back([&q, &opened] {
      const std::string error = Open(&q);
      if (!error.empty()) {
        Fail(error);
        opened++;
        return;
      }
      opened++;
      Loop(&q);
    });
  }
  while (opened.load() < queues.size()) usleep(1000);
  auto failure = [] {
    std::lock_guard<std::mutex> lock(g_error_mu);
    return g_error;
  };
  const bool ready = failure().empty();
  if (ready) {
    const std::vector<std::string>& names = absl::GetFlag(FLAGS_netns);
    std::fprintf(stderr, "delay_holder: ready: %zu queue(s) (netns %s), delay %" PRId64 " us, pid %d\n",
                 queues.size(), names.empty() ? "-" : absl::StrJoin(names, ",").c_str(), delay_us,
                 static_cast<int>(getpid()));
    std::fflush(stderr);
  }
  while (!g_stop.load()) {
    const timespec tick{0, 200000000};  // to see a thread's failure
    const int sig = sigtimedwait(&set, nullptr, &tick);
    if (sig == SIGUSR1) {
      for (const Queue& q : queues) Report(q);
    } else if (sig == SIGTERM || sig == SIGINT) {
      g_stop = true;
    }
  }
  for (std::thread& t : threads) t.join();
  const std::string error = failure();
  // Before "ready" a failure is the machine's set-up (not root, no nfnetlink_queue): exit 2.
  if (!error.empty() && !ready) throw UserError("delay_holder: " + error);
  if (!error.empty()) throw std::runtime_error("delay_holder: " + error);
  for (const Queue& q : queues) Report(q);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "holds every packet of an NFQUEUE for --delay_us, then accepts it (the emulated cluster's "
      "delay without netem).\n"
      "usage: delay_holder --delay_us=US [--netns=NS1,NS2,...] [--queue=0] [--rt]");
  return distlm::RunMain([&] { return Run(absl::ParseCommandLine(argc, argv)); });
}
