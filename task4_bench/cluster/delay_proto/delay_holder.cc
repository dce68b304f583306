// delay_holder: one-way packet delay for kernels without netem (prototype).
//
// An iptables rule in a node's namespace sends the packets to an NFQUEUE; this program holds
// every queued packet for --delay_us and then accepts it. The delay is the same for every packet
// of a queue, so the release order is the arrival order: a FIFO of (packet id, due time) is all
// the scheduling there is, and one batch verdict (nfq_set_verdict_batch: "accept every packet up
// to id X") releases all the packets that are due, in order.
//
//   delay_holder --delay_us=20000 [--queue=0] [--netns=NAME]... [--maxlen=200000] [--rt]
//                [--max_advance_us=300]   # 0: no timer advance (see Queue::advance_ns)
//
// One thread per --netns (a name under /run/netns; none: the current namespace). Each thread
// joins its namespace with setns() and opens its own queue there, so a single process in the
// host namespace serves every node and is not one of the nodes' processes.
// GSO packets are queued whole (NFQA_CFG_F_GSO) and only their first 20 bytes (the IP header,
// for the statistics) are copied. Fail-open is off: a full queue drops, as a full link would.
// SIGTERM/SIGINT: every held packet is accepted at once, the statistics go to stderr, exit 0.
// SIGUSR1: statistics to stderr.
// The delay counts from the kernel's receive stamp of the packet where it has one (a queue on
// PREROUTING), else from the moment the holder read it.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <netinet/ip.h>
#include <sys/time.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include <libnetfilter_queue/libnetfilter_queue.h>
}

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_report{false};

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

struct Held {
  uint32_t id;
  uint32_t bytes;
  int64_t due_ns;
};

struct Queue {
  std::string netns;  // "" = the namespace the process started in
  int num = 0;
  int64_t delay_ns = 0;
  uint32_t maxlen = 0;
  // Filled in by the thread.
  nfq_handle* h = nullptr;
  nfq_q_handle* qh = nullptr;
  std::deque<Held> held;
  int64_t recv_now_ns = 0;       // CLOCK_MONOTONIC when the batch being parsed was read
  int64_t recv_realtime_ns = 0;  // the same moment in CLOCK_REALTIME (the packets' stamps' clock)
  uint64_t held_bytes = 0;
  // Statistics.
  uint64_t packets = 0, bytes = 0, max_held_packets = 0, max_held_bytes = 0, gso_packets = 0;
  uint64_t stamped = 0;  // packets whose due time counts from the kernel's receive stamp
  int64_t max_stamp_age_ns = 0;
  uint64_t late_releases = 0;  // released more than 200 us after the due time
  int64_t max_lateness_ns = 0;
  double sum_lateness_ns = 0;  // over all releases (early ones count negative)
  // Timer advance: the thread sleeps until (due - advance) and releases what is due by then plus
  // the advance; the advance follows the measured wake-up lateness, so that on average the
  // packets leave at their due time rather than one wake-up latency after it.
  int64_t advance_ns = 0;
  int64_t max_advance_ns = 0;
  uint64_t enobufs = 0, verdict_errors = 0;
};

int OnPacket(nfq_q_handle*, nfgenmsg*, nfq_data* nfa, void* data) {
  auto* q = static_cast<Queue*>(data);
  nfqnl_msg_packet_hdr* ph = nfq_get_msg_packet_hdr(nfa);
  if (ph == nullptr) return 0;
  uint32_t bytes = 0;
  unsigned char* payload = nullptr;
  if (nfq_get_payload(nfa, &payload) >= 20 && (payload[0] >> 4) == 4) {
    bytes = ntohs(reinterpret_cast<const iphdr*>(payload)->tot_len);
  }
  // The packet arrived before we read it: with a receive stamp (see main) the delay counts from
  // the arrival, so the holder's own wake-up latency is not added to it (up to the delay).
  int64_t age_ns = 0;
  timeval tv{};
  if (nfq_get_timestamp(nfa, &tv) == 0) {
    const int64_t age = q->recv_realtime_ns - (int64_t{tv.tv_sec} * 1000000000 + int64_t{tv.tv_usec} * 1000);
    if (age >= 0 && age < 1000000000) {  // else not a receive stamp (e.g. TCP's departure time)
      age_ns = age;
      q->stamped++;
      if (age > q->max_stamp_age_ns) q->max_stamp_age_ns = age;
    }
  }
  q->held.push_back(Held{ntohl(ph->packet_id), bytes, q->recv_now_ns - age_ns + q->delay_ns});
  q->held_bytes += bytes;
  q->packets++;
  q->bytes += bytes;
  if (bytes > 1500) q->gso_packets++;
  if (q->held.size() > q->max_held_packets) q->max_held_packets = q->held.size();
  if (q->held_bytes > q->max_held_bytes) q->max_held_bytes = q->held_bytes;
  return 0;
}

// Accepts, in one batch verdict, every held packet due by now_ns (all of them if flush).
// timed: this call follows a sleep that was timed for the head packet (it feeds the advance).
void Release(Queue* q, int64_t now_ns, bool flush, bool timed) {
  if (timed && !q->held.empty() && q->max_advance_ns > 0) {
    const int64_t error = now_ns - q->held.front().due_ns;  // > 0: woke up late
    q->advance_ns = std::clamp<int64_t>(q->advance_ns + error / 8, 0, q->max_advance_ns);
  }
  size_t n = 0;
  while (n < q->held.size() && (flush || q->held[n].due_ns - q->advance_ns <= now_ns)) {
    const int64_t late = now_ns - q->held[n].due_ns;
    q->sum_lateness_ns += static_cast<double>(late);
    if (late > q->max_lateness_ns) q->max_lateness_ns = late;
    if (late > 200000) q->late_releases++;
    q->held_bytes -= q->held[n].bytes;
    n++;
  }
  if (n == 0) return;
  if (nfq_set_verdict_batch(q->qh, q->held[n - 1].id, NF_ACCEPT) < 0) q->verdict_errors++;
  q->held.erase(q->held.begin(), q->held.begin() + static_cast<long>(n));
}

void Report(const Queue& q) {
  std::fprintf(stderr,
               "delay_holder: netns=%s queue=%d delay_us=%" PRId64 " packets=%" PRIu64 " bytes=%" PRIu64
               " gso_packets=%" PRIu64 " stamped=%" PRIu64 " max_stamp_age_us=%.1f max_held_packets=%" PRIu64 " max_held_bytes=%" PRIu64
               " mean_late_us=%.1f late_over_200us=%" PRIu64 " max_late_us=%.1f advance_us=%.1f enobufs=%" PRIu64 " verdict_errors=%" PRIu64 "\n",
               q.netns.empty() ? "-" : q.netns.c_str(), q.num, q.delay_ns / 1000, q.packets, q.bytes,
               q.gso_packets, q.stamped, q.max_stamp_age_ns / 1e3, q.max_held_packets, q.max_held_bytes,
               q.packets ? q.sum_lateness_ns / 1e3 / static_cast<double>(q.packets) : 0.0, q.late_releases,
               q.max_lateness_ns / 1e3, q.advance_ns / 1e3,
               q.enobufs, q.verdict_errors);
}

[[noreturn]] void Die(const Queue& q, const char* what) {
  std::fprintf(stderr, "error: delay_holder: netns=%s queue=%d: %s: %s\n", q.netns.empty() ? "-" : q.netns.c_str(),
               q.num, what, std::strerror(errno));
  std::exit(2);
}

// Opens the queue (in q->netns). Done before the threads loop, so that a failure stops the start.
void Open(Queue* q) {
  if (!q->netns.empty()) {
    const std::string path = "/run/netns/" + q->netns;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Die(*q, ("open " + path).c_str());
    if (setns(fd, CLONE_NEWNET) != 0) Die(*q, "setns");
    close(fd);
  }
  q->h = nfq_open();
  if (q->h == nullptr) Die(*q, "nfq_open");
  q->qh = nfq_create_queue(q->h, static_cast<uint16_t>(q->num), &OnPacket, q);
  if (q->qh == nullptr) Die(*q, "nfq_create_queue (is another program bound to this queue?)");
  if (nfq_set_mode(q->qh, NFQNL_COPY_PACKET, 20) < 0) Die(*q, "nfq_set_mode");
  if (nfq_set_queue_maxlen(q->qh, q->maxlen) < 0) Die(*q, "nfq_set_queue_maxlen");
  // Whole GSO packets; no fail-open (so a full queue drops rather than passing undelayed).
  if (nfq_set_queue_flags(q->qh, NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_GSO) < 0) {
    Die(*q, "nfq_set_queue_flags");
  }
  const int fd = nfq_fd(q->h);
  int size = 64 << 20;  // root: beyond net.core.rmem_max
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0) Die(*q, "SO_RCVBUFFORCE");
  int one = 1;
  setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));
}

void Loop(Queue* q) {
  const int fd = nfq_fd(q->h);
  std::vector<char> buf(1 << 20);
  bool timed = false;
  while (!g_stop.load(std::memory_order_relaxed)) {
    int64_t now = NowNs();
    Release(q, now, false, timed);
    timed = false;
    timespec timeout{0, 200000000};  // wake now and then for the stop flag
    bool for_head = false;
    if (!q->held.empty()) {
      const int64_t wait = q->held.front().due_ns - q->advance_ns - now;
      if (wait < timeout.tv_nsec) {
        timeout.tv_nsec = wait > 0 ? wait : 0;
        for_head = wait > 0;
      }
    }
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ppoll(&pfd, 1, &timeout, nullptr);
    if (ready < 0 && errno != EINTR) Die(*q, "ppoll");
    if (ready == 0) timed = for_head;
    if (ready <= 0) continue;
    // Drain what is there; every message of one recv gets that recv's arrival time.
    for (int i = 0; i < 64; i++) {
      const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0) {
        if (errno == ENOBUFS) {
          q->enobufs++;
          continue;
        }
        if (errno == EAGAIN || errno == EINTR) break;
        Die(*q, "recv");
      }
      q->recv_now_ns = NowNs();
      timespec rt;
      clock_gettime(CLOCK_REALTIME, &rt);
      q->recv_realtime_ns = int64_t{rt.tv_sec} * 1000000000 + rt.tv_nsec;
      nfq_handle_packet(q->h, buf.data(), static_cast<int>(n));
    }
  }
  Release(q, NowNs(), true, false);
  nfq_destroy_queue(q->qh);
  nfq_close(q->h);
}

void OnSignal(int sig) {
  if (sig == SIGUSR1) {
    g_report = true;
  } else {
    g_stop = true;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t delay_us = -1;
  int queue_num = 0;
  uint32_t maxlen = 200000;
  bool rt = false;
  int64_t max_advance_us = 300;
  std::vector<std::string> namespaces;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const size_t len = std::strlen(name);
      return a.compare(0, len, name) == 0 ? argv[i] + len : nullptr;
    };
    if (const char* v = value("--delay_us=")) {
      delay_us = std::atoll(v);
    } else if (const char* v = value("--queue=")) {
      queue_num = std::atoi(v);
    } else if (const char* v = value("--netns=")) {
      namespaces.emplace_back(v);
    } else if (const char* v = value("--maxlen=")) {
      maxlen = static_cast<uint32_t>(std::atoll(v));
    } else if (const char* v = value("--max_advance_us=")) {
      max_advance_us = std::atoll(v);
    } else if (a == "--rt") {
      rt = true;
    } else {
      std::fprintf(stderr,
                   "usage: delay_holder --delay_us=US [--queue=N] [--netns=NAME]... [--maxlen=PACKETS] [--rt]"
                   " [--max_advance_us=300]\n");
      return 2;
    }
  }
  if (delay_us < 0 || queue_num < 0 || queue_num > 65535) {
    std::fprintf(stderr, "error: delay_holder: --delay_us=US (>= 0) is required; --queue in 0..65535\n");
    return 2;
  }
  if (namespaces.empty()) namespaces.emplace_back("");
  // A socket that asks for receive timestamps turns on the kernel's (global) stamping of every
  // received packet (net_enable_timestamp), which NFQUEUE then reports as NFQA_TIMESTAMP.
  const int stamp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int on = 1;
  if (stamp_fd < 0 || setsockopt(stamp_fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) != 0) {
    std::perror("delay_holder: SO_TIMESTAMPNS (delays will count from the holder's reads)");
  }
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // ns-precise ppoll timeouts (inherited by the threads)
  if (rt) {
    sched_param p{};
    p.sched_priority = 10;
    if (sched_setscheduler(0, SCHED_FIFO, &p) != 0) std::perror("delay_holder: SCHED_FIFO (going on without)");
  }
  // The signals go to the main thread only; the loops poll the flag.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  std::vector<Queue> queues(namespaces.size());
  for (size_t i = 0; i < queues.size(); i++) {
    queues[i].netns = namespaces[i];
    queues[i].num = queue_num;
    queues[i].delay_ns = delay_us * 1000;
    queues[i].maxlen = maxlen;
    queues[i].max_advance_ns = std::min(max_advance_us * 1000, delay_us * 1000 / 4);
    queues[i].advance_ns = std::min<int64_t>(50000, queues[i].max_advance_ns);  // a typical wake-up latency
  }
  // Each queue is opened in its thread (setns is per thread); the main thread waits for all.
  std::atomic<size_t> opened{0};
  std::vector<std::thread> threads;
  for (auto& q : queues) {
    threads.emplace_back([&q, &opened] {
      Open(&q);
      opened++;
      Loop(&q);
    });
  }
  while (opened.load() < queues.size()) usleep(1000);
  std::fprintf(stderr, "delay_holder: ready: %zu queue(s), delay %" PRId64 " us\n", queues.size(), delay_us);
  std::fflush(stderr);

  struct sigaction sa{};
  sa.sa_handler = &OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  while (!g_stop) {
    pause();
    if (g_report.exchange(false)) {
      for (const auto& q : queues) Report(q);  // racy reads of counters: fine for statistics
    }
  }
  for (auto& t : threads) t.join();
  for (const auto& q : queues) Report(q);
  return 0;
}
