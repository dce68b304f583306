#include "tools/no_spawn.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stdexcept>

namespace distlm::tools {
namespace {

constexpr uintptr_t kPage = 4096;
// The path goes at a random 8-byte-aligned offset in the first half of the page, so it may be
// up to half a page long.
constexpr uintptr_t kMaxPath = kPage / 2;

uint64_t Random64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != static_cast<ssize_t>(sizeof(v))) {
    throw std::runtime_error(std::string("no-spawn filter: getrandom: ") + strerror(errno));
  }
  return v;
}

std::vector<sock_filter> Build(uintptr_t exec_path) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) throw std::runtime_error("no-spawn filter: seccomp_init failed");
  struct Release {
    scmp_filter_ctx ctx;
    ~Release() { seccomp_release(ctx); }
  } release{ctx};
  auto rule = [ctx](uint32_t action, int syscall, const std::vector<scmp_arg_cmp>& cmp, const char* name) {
    const int rc = seccomp_rule_add_array(ctx, action, syscall, static_cast<unsigned>(cmp.size()), cmp.data());
    if (rc < 0) throw std::runtime_error(std::string("no-spawn filter: rule for ") + name + ": " + strerror(-rc));
  };
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  rule(eperm, SCMP_SYS(fork), {}, "fork");
  rule(eperm, SCMP_SYS(vfork), {}, "vfork");
  // clone(flags, ...): a thread shares the process (CLONE_THREAD); anything else is a new one.
  rule(eperm, SCMP_SYS(clone), {scmp_arg_cmp{0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0}}, "clone");
  // clone3 passes its flags in memory, out of a filter's reach: "not implemented" makes glibc
  // fall back to clone, which the rule above judges.
  rule(SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), {}, "clone3");
  rule(eperm, SCMP_SYS(execveat), {}, "execveat");
  if (exec_path != 0) {
    rule(eperm, SCMP_SYS(execve), {scmp_arg_cmp{0, SCMP_CMP_NE, exec_path, 0}}, "execve");
  } else {
    rule(eperm, SCMP_SYS(execve), {}, "execve");
  }
  rule(eperm, SCMP_SYS(ptrace), {}, "ptrace");
  rule(eperm, SCMP_SYS(process_vm_readv), {}, "process_vm_readv");
  rule(eperm, SCMP_SYS(process_vm_writev), {}, "process_vm_writev");
  // Kernel objects that outlive every process of their user: a key in the user's keyring and a
  // POSIX message queue would carry bytes from one graded run to the next (the files a run can
  // leave are sealed or removed after it; System V IPC is removed by owner). Nothing a rank runs
  // (LibTorch, Gloo, OpenMP, OpenBLAS) uses either.
  rule(eperm, SCMP_SYS(add_key), {}, "add_key");
  rule(eperm, SCMP_SYS(request_key), {}, "request_key");
  rule(eperm, SCMP_SYS(keyctl), {}, "keyctl");
  rule(eperm, SCMP_SYS(mq_open), {}, "mq_open");
  // Exported once, here: libseccomp allocates, which a forked child must not.
  const int fd = memfd_create("no_spawn_bpf", MFD_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("no-spawn filter: memfd_create: ") + strerror(errno));
  std::string bytes;
  int rc = seccomp_export_bpf(ctx, fd);
  if (rc == 0 && lseek(fd, 0, SEEK_SET) == 0) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) bytes.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (rc != 0 || bytes.empty() || bytes.size() % sizeof(sock_filter) != 0) {
    throw std::runtime_error("no-spawn filter: seccomp_export_bpf failed");
  }
  std::vector<sock_filter> program(bytes.size() / sizeof(sock_filter));
  memcpy(program.data(), bytes.data(), bytes.size());
  return program;
}

}  // namespace

NoSpawnFilter NoSpawnFilter::ExecOnce() {
  NoSpawnFilter f;
  // A page between 1 TiB and 64 TiB: above where the kernel puts a process's own mappings in
  // practice, below the top of the 47-bit user space.
  const uint64_t pages = (uint64_t{1} << 46) / kPage - (uint64_t{1} << 40) / kPage;
  f.exec_page_ = static_cast<uintptr_t>((uint64_t{1} << 40) + (Random64() % pages) * kPage);
  f.exec_path_ = f.exec_page_ + static_cast<uintptr_t>(Random64() % (kMaxPath / 8)) * 8;
  f.program_ = Build(f.exec_path_);
  return f;
}

NoSpawnFilter NoSpawnFilter::NoExec() {
  NoSpawnFilter f;
  f.program_ = Build(0);
  return f;
}

int NoSpawnFilter::ExecConfined(const char* path, char* const argv[], char* const envp[]) const {
  const size_t len = strlen(path);
  if (exec_page_ == 0 || (exec_path_ - exec_page_) + len + 1 > kPage) {
    errno = exec_page_ == 0 ? EPERM : ENAMETOOLONG;
    return -1;
  }
  void* page = mmap(reinterpret_cast<void*>(exec_page_), kPage, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (page == MAP_FAILED) return -1;
  if (page != reinterpret_cast<void*>(exec_page_)) {  // a kernel older than 4.17 took it as a hint
    munmap(page, kPage);
    errno = EEXIST;
    return -1;
  }
  memcpy(reinterpret_cast<void*>(exec_path_), path, len + 1);
  if (int err = Install(); err != 0) {
    errno = err;
    return -1;
  }
  execve(reinterpret_cast<const char*>(exec_path_), argv, envp);
  return -1;
}

int NoSpawnFilter::Install() const {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  sock_fprog prog{static_cast<unsigned short>(program_.size()), const_cast<sock_filter*>(program_.data())};
  // TSYNC: every thread of the process, not only the caller.
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0) return errno;
  return 0;
}

int NoSpawnFilter::ExecHook(const char* path, char* const argv[], char* const envp[], const void* arg) {
  return static_cast<const NoSpawnFilter*>(arg)->ExecConfined(path, argv, envp);
}

}  // namespace distlm::tools
