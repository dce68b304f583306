// A program that holds a known amount of memory and uses a known amount of CPU time, for
// //grading/jail:process_watch_test:
//   memory_hog MB HOLD_MS [CPU_MS [leader_exits | maps=FILE]]
// allocates MB MiB, writes every page (so that each is resident), holds them HOLD_MS
// milliseconds, then computes until it has used CPU_MS milliseconds of CPU time (0 if not
// given), and exits 0. With leader_exits all of it runs on a second thread, and the first ends
// at once (pthread_exit): a process whose first thread is a zombie while the work goes on. With
// maps=FILE it first maps FILE and reads every page of it, as a program's libraries are.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace {

int Hog(int argc, char** argv) {
  const size_t bytes = static_cast<size_t>(std::atol(argv[1])) << 20;
  char* p = static_cast<char*>(std::malloc(bytes));
  if (p == nullptr) return 3;
  std::memset(p, 1, bytes);
  usleep(static_cast<useconds_t>(std::atol(argv[2])) * 1000);
  // Read back, so that the writes are not optimised away; as many times as CPU_MS asks.
  const double cpu_s = argc == 4 ? std::atol(argv[3]) / 1000.0 : 0;
  long sum = 0, rounds = 0;
  for (;;) {
    for (size_t i = 0; i < bytes; i += 4096) sum += p[i];
    ++rounds;
    timespec used{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
    if (used.tv_sec + used.tv_nsec / 1e9 >= cpu_s) break;
  }
  std::free(p);
  return sum == rounds * static_cast<long>(bytes / 4096) ? 0 : 4;
}

int argc_;
char** argv_;

}  // namespace

// Maps `path` and reads every page; the mapping stays for the process's life.
bool MapAndRead(const char* path) {
  const int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) return false;
  const auto* p = static_cast<const volatile char*>(mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0));
  close(fd);
  if (p == MAP_FAILED) return false;
  long sum = 0;
  for (off_t i = 0; i < st.st_size; i += 4096) sum += p[i];
  return sum >= 0;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) return 2;
  if (argc < 5) return Hog(argc, argv);
  if (std::strncmp(argv[4], "maps=", 5) == 0) return MapAndRead(argv[4] + 5) ? Hog(4, argv) : 6;
  if (std::strcmp(argv[4], "leader_exits") != 0) return 2;
  argc_ = 4;
  argv_ = argv;
  pthread_t worker;
  if (pthread_create(&worker, nullptr, [](void*) -> void* { std::exit(Hog(argc_, argv_)); }, nullptr) != 0) return 5;
  pthread_exit(nullptr);
}
