// Tries every way of starting a process or another program, or of leaving a kernel object for a
// later run, and prints, one line each, what happened: "fork: Operation not permitted" or "fork: ALLOWED". A thread must still start.
// Run by no_spawn_test under `launch --no_spawn` (all refused) and plain `launch` (all allowed).
#include <fcntl.h>
#include <mqueue.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

extern char** environ;

namespace {

void Say(const char* what, long result, int err) {
  std::printf("%s: %s\n", what, result >= 0 ? "ALLOWED" : std::strerror(err));
  std::fflush(stdout);
}

// A child that was made anyway leaves at once and is reaped.
void Reap(long pid) {
  if (pid > 0) waitpid(static_cast<pid_t>(pid), nullptr, 0);
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  {
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    Say("fork", pid, errno);
    Reap(pid);
  }
  {
    const pid_t pid = vfork();
    if (pid == 0) _exit(0);
    Say("vfork", pid, errno);
    Reap(pid);
  }
  {
    const long pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) _exit(0);
    Say("clone", pid, errno);
    Reap(pid);
  }
  {
    clone_args args{};
    args.exit_signal = SIGCHLD;
    const long pid = syscall(SYS_clone3, &args, sizeof(args));
    if (pid == 0) _exit(0);
    Say("clone3", pid, errno);
    Reap(pid);
  }
  {
    pid_t pid = -1;
    char arg0[] = "/bin/true";
    char* argv[] = {arg0, nullptr};
    const int rc = posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ);
    Say("posix_spawn", rc == 0 ? pid : -1, rc);
    if (rc == 0) Reap(pid);
  }
  {
    const int rc = std::system("exit 0");
    Say("system", rc == 0 ? 0 : -1, errno);
  }
  {
    bool ran = false;
    std::thread t([&ran] { ran = true; });
    t.join();
    std::printf("thread: %s\n", ran ? "ran" : "did not run");
  }
  {
    // Reading a process's memory from outside it (its own, here: always allowed unfiltered).
    char from[8] = "secret", to[8] = {0};
    iovec local{to, sizeof(to)}, remote{from, sizeof(from)};
    const long rc = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    Say("process_vm_readv", rc, errno);
  }
  {
    // A key in the user's keyring (KEY_SPEC_USER_KEYRING) outlives the process; revoked at once
    // when it was made.
    const long key = syscall(SYS_add_key, "user", "distlm_no_spawn_testee", "x", 1, -4);
    Say("add_key", key, errno);
    if (key >= 0) syscall(SYS_keyctl, 3 /* KEYCTL_REVOKE */, key);
    const long found = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -4, 0);
    Say("keyctl", found, errno);
  }
  {
    // A POSIX message queue outlives the process too; removed at once when it was made.
    mq_attr attr{};
    attr.mq_maxmsg = 1;
    attr.mq_msgsize = 8;
    const std::string name = "distlm_no_spawn_testee_" + std::to_string(getpid());
    const long q = syscall(SYS_mq_open, name.c_str(), O_CREAT | O_RDWR, 0600, &attr);
    Say("mq_open", q, errno);
    if (q >= 0) {
      close(static_cast<int>(q));
      syscall(SYS_mq_unlink, name.c_str());
    }
  }
  {
    char arg0[] = "/bin/true";
    char* argv[] = {arg0, nullptr};
    const long rc = syscall(SYS_execveat, AT_FDCWD, "/bin/true", argv, environ, 0);
    Say("execveat", rc, errno);  // printed only when it failed: /bin/true prints nothing
  }
  {
    char arg0[] = "/bin/echo";
    char arg1[] = "execve: ALLOWED";
    char* argv[] = {arg0, arg1, nullptr};
    execve("/bin/echo", argv, environ);
    Say("execve", -1, errno);
  }
  std::printf("done\n");
  return 0;
}
