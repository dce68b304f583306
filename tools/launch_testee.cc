// A rank for launch_test: does one small thing the test can check from outside.
//
//   launch_testee env
//       prints the launcher's variables and the working directory; rank 0 also listens on
//       MASTER_ADDR:MASTER_PORT, as a TCPStore would, and says whether it could.
//   launch_testee lines N
//       prints N numbered lines on stdout in odd-sized writes that cut lines apart, one line on
//       stderr, and a last stdout line without '\n'.
//   launch_testee long N
//       prints one line of N bytes.
//   launch_testee run DIR [key=value...]
//       the ranks of a failure or signal scenario. Every rank starts a child (in its process
//       group), writes "PID CHILD_PID" to DIR/rank_R.pid and sleeps sleep_s (60). Keys:
//       (the child creates DIR/rank_R.child_got_S when SIGINT or SIGTERM, S, reaches it);
//       fail_rank (a rank, or "all") instead waits for every pid file, then exits after
//       after_ms with code (a negative code -S: kills itself with signal S), leaving its child
//       behind;
//       ignore_term=1 ignores SIGTERM (rank and child); kill_parent=S makes rank 0 send signal
//       S to the launcher once every pid file is there.
//   launch_testee run DIR [key=value...] --join
//       a joiner (the launcher's --join_ranks): prints "rank R joiner ready", sleeps joiner_ms
//       (1000) and exits with joiner_code (0).
//
// Deliberately free of LibTorch and absl, so that four of them start in milliseconds.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "<unset>";
}

int Rank() { return std::atoi(Env("RANK").c_str()); }

void WriteAllOrDie(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0) std::exit(90);
    data += n;
    size -= static_cast<size_t>(n);
  }
}

std::string TryListen(const std::string& addr, const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(addr.c_str(), port.c_str(), &hints, &found); rc != 0) return gai_strerror(rc);
  std::string result = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1) == 0) {
      result = "ok";
    } else {
      result = std::strerror(errno);
    }
    close(fd);
    if (result == "ok") break;
  }
  freeaddrinfo(found);
  return result;
}

int EnvMode() {
  std::printf("RANK=%s LOCAL_RANK=%s WORLD_SIZE=%s LOCAL_WORLD_SIZE=%s GROUP_RANK=%s MASTER_ADDR=%s MASTER_PORT=%s\n",
              Env("RANK").c_str(), Env("LOCAL_RANK").c_str(), Env("WORLD_SIZE").c_str(),
              Env("LOCAL_WORLD_SIZE").c_str(), Env("GROUP_RANK").c_str(), Env("MASTER_ADDR").c_str(),
              Env("MASTER_PORT").c_str());
  char cwd[4096];
  std::printf("cwd=%s\n", getcwd(cwd, sizeof(cwd)) ? cwd : "?");
  if (Rank() == 0) std::printf("listen=%s\n", TryListen(Env("MASTER_ADDR"), Env("MASTER_PORT")).c_str());
  return 0;
}

int LinesMode(int n) {
  int rank = Rank();
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += "rank " + std::to_string(rank) + " line " + std::to_string(i) + " " + std::string(i % 97, 'x') + "\n";
  }
  text += "rank " + std::to_string(rank) + " tail";
  // Chunk sizes chosen to split lines at every possible place, and one larger than a pipe.
  const size_t chunks[] = {1, 7, 4093, 13, 70000, 2};
  size_t pos = 0;
  for (int k = 0; pos < text.size(); ++k) {
    size_t len = std::min(chunks[k % 6], text.size() - pos);
    WriteAllOrDie(1, text.data() + pos, len);
    pos += len;
    if (k == 0) {
      std::string err = "rank " + std::to_string(rank) + " to stderr\n";
      WriteAllOrDie(2, err.data(), err.size());
    }
  }
  return 0;
}

void SleepSeconds(double s) {
  // sleep_for resumes after a handled signal, so an ignored SIGTERM does not end it early.
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

// Marker file per signal, prepared before the handler can run (it may only make
// async-signal-safe calls).
char g_markers[NSIG][4096];

void NoteSignalAndExit(int sig) {
  int fd = open(g_markers[sig], O_WRONLY | O_CREAT, 0644);
  if (fd >= 0) close(fd);
  _exit(0);
}

int RunMode(const std::string& dir, const std::map<std::string, std::string>& kv) {
  auto get = [&](const char* key, int def) { return kv.count(key) ? std::atoi(kv.at(key).c_str()) : def; };
  int rank = Rank();
  int world = std::atoi(Env("WORLD_SIZE").c_str());
  int sleep_s = get("sleep_s", 60);
  if (get("ignore_term", 0) == 1) signal(SIGTERM, SIG_IGN);  // inherited by the child below
  // The child notes which signals reach it, so the test can tell that signals went to the
  // rank's whole process group and not only to the rank. The handlers are installed before
  // fork(), so the child has them from its first instruction; the rank then drops its own.
  std::vector<int> noted = {SIGINT};
  if (get("ignore_term", 0) != 1) noted.push_back(SIGTERM);
  for (int sig : noted) {
    std::string marker = dir + "/rank_" + std::to_string(rank) + ".child_got_" + std::to_string(sig);
    std::snprintf(g_markers[sig], sizeof(g_markers[sig]), "%s", marker.c_str());
    struct sigaction sa {};
    sa.sa_handler = NoteSignalAndExit;
    sigaction(sig, &sa, nullptr);
  }
  pid_t child = fork();
  if (child == 0) {
    SleepSeconds(sleep_s);
    _exit(0);
  }
  for (int sig : noted) signal(sig, SIG_DFL);
  std::string path = dir + "/rank_" + std::to_string(rank) + ".pid";
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return 91;
  std::fprintf(f, "%d %d\n", static_cast<int>(getpid()), static_cast<int>(child));
  std::fclose(f);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return 92;
  std::printf("rank %d ready\n", rank);
  std::fflush(stdout);

  // Act only once every rank has written its pid file, so the test knows every process it
  // must later see gone.
  auto wait_for_pid_files = [&] {
    for (int tries = 0; tries < 1000; ++tries) {
      int present = 0;
      for (int r = 0; r < world; ++r) {
        if (access((dir + "/rank_" + std::to_string(r) + ".pid").c_str(), F_OK) == 0) ++present;
      }
      if (present == world) return;
      SleepSeconds(0.01);
    }
  };
  bool fails = kv.count("fail_rank") && (kv.at("fail_rank") == "all" || rank == get("fail_rank", -1));
  if (fails) {
    wait_for_pid_files();
    SleepSeconds(get("after_ms", 0) / 1000.0);
    int code = get("code", 1);
    if (code < 0) kill(getpid(), -code);
    return code;  // the child stays behind, for the launcher to clean up
  }
  if (int sig = get("kill_parent", 0); sig > 0 && rank == 0) {
    wait_for_pid_files();
    kill(getppid(), sig);
  }
  SleepSeconds(sleep_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "env") return EnvMode();
  if (mode == "lines" && argc == 3) return LinesMode(std::atoi(argv[2]));
  if (mode == "long" && argc == 3) {
    std::string line(static_cast<size_t>(std::atol(argv[2])), 'a');
    line += "\n";
    WriteAllOrDie(1, line.data(), line.size());
    return 0;
  }
  if (mode == "run" && argc >= 3) {
    std::map<std::string, std::string> kv;
    bool joiner = false;
    for (int i = 3; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--join") {
        joiner = true;
        continue;
      }
      auto eq = a.find('=');
      if (eq == std::string::npos) return 93;
      kv[a.substr(0, eq)] = a.substr(eq + 1);
    }
    if (joiner) {
      std::printf("rank %d joiner ready\n", Rank());
      std::fflush(stdout);
      SleepSeconds((kv.count("joiner_ms") ? std::atoi(kv.at("joiner_ms").c_str()) : 1000) / 1000.0);
      return kv.count("joiner_code") ? std::atoi(kv.at("joiner_code").c_str()) : 0;
    }
    return RunMode(argv[2], kv);
  }
  std::fprintf(stderr, "usage: launch_testee env | lines N | long N | run DIR [key=value...]\n");
  return 94;
}
