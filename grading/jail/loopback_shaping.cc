#include "grading/jail/loopback_shaping.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace distlm::grading {
namespace {

constexpr uint32_t kBurstBytes = 256 * 1024;
constexpr uint32_t kQueueBytes = 64 * 1024 * 1024;
constexpr int kLoopbackIndex = 1;  // lo is always the first interface of a namespace

// Appends attribute `type` with `len` bytes of `data` at `msg`'s end (NLMSG_ALIGNed), returns it.
rtattr* Put(nlmsghdr* msg, size_t capacity, unsigned short type, const void* data, size_t len) {
  const size_t at = NLMSG_ALIGN(msg->nlmsg_len);
  if (at + RTA_SPACE(len) > capacity) return nullptr;
  auto* a = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(msg) + at);
  a->rta_type = type;
  a->rta_len = static_cast<unsigned short>(RTA_LENGTH(len));
  if (len > 0) memcpy(RTA_DATA(a), data, len);
  msg->nlmsg_len = static_cast<uint32_t>(at + RTA_SPACE(len));
  return a;
}

}  // namespace

int ShapeLoopback(uint64_t bytes_per_s) {
  if (bytes_per_s == 0 || bytes_per_s > 0xffffffffULL) return EINVAL;
  alignas(nlmsghdr) char buf[512];
  memset(buf, 0, sizeof(buf));
  auto* msg = reinterpret_cast<nlmsghdr*>(buf);
  msg->nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
  msg->nlmsg_type = RTM_NEWQDISC;
  msg->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
  msg->nlmsg_seq = 1;
  auto* tc = static_cast<tcmsg*>(NLMSG_DATA(msg));
  tc->tcm_family = AF_UNSPEC;
  tc->tcm_ifindex = kLoopbackIndex;
  tc->tcm_handle = 0x10000;  // 1:
  tc->tcm_parent = TC_H_ROOT;
  if (Put(msg, sizeof(buf), TCA_KIND, "tbf", 4) == nullptr) return E2BIG;
  rtattr* options = Put(msg, sizeof(buf), TCA_OPTIONS, nullptr, 0);
  if (options == nullptr) return E2BIG;
  tc_tbf_qopt q;
  memset(&q, 0, sizeof(q));
  q.rate.rate = static_cast<uint32_t>(bytes_per_s);
  q.limit = kQueueBytes;
  const uint32_t burst = kBurstBytes;
  if (Put(msg, sizeof(buf), TCA_TBF_PARMS, &q, sizeof(q)) == nullptr ||
      Put(msg, sizeof(buf), TCA_TBF_BURST, &burst, sizeof(burst)) == nullptr) {
    return E2BIG;
  }
  options->rta_len = static_cast<unsigned short>(buf + msg->nlmsg_len - reinterpret_cast<char*>(options));

  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return errno;
  sockaddr_nl kernel;
  memset(&kernel, 0, sizeof(kernel));
  kernel.nl_family = AF_NETLINK;
  int err = 0;
  if (sendto(fd, buf, msg->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) < 0) {
    err = errno;
  } else {
    alignas(nlmsghdr) char reply[1024];
    const ssize_t n = recv(fd, reply, sizeof(reply), 0);
    if (n < 0) {
      err = errno;
    } else {
      auto* r = reinterpret_cast<nlmsghdr*>(reply);
      if (!NLMSG_OK(r, static_cast<unsigned>(n)) || r->nlmsg_type != NLMSG_ERROR) {
        err = EPROTO;
      } else {
        err = -static_cast<nlmsgerr*>(NLMSG_DATA(r))->error;  // 0: the acknowledgement
      }
    }
  }
  close(fd);
  return err;
}

}  // namespace distlm::grading
