// A program that holds a known amount of memory, for //grading:memory_watch_test:
//   memory_hog MB HOLD_MS
// allocates MB MiB, writes every page (so that each is resident), holds them HOLD_MS
// milliseconds, and exits 0.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const size_t bytes = static_cast<size_t>(std::atol(argv[1])) << 20;
  char* p = static_cast<char*>(std::malloc(bytes));
  if (p == nullptr) return 3;
  std::memset(p, 1, bytes);
  usleep(static_cast<useconds_t>(std::atol(argv[2])) * 1000);
  // Read back, so that the writes are not optimised away.
  long sum = 0;
  for (size_t i = 0; i < bytes; i += 4096) sum += p[i];
  std::free(p);
  return sum == static_cast<long>(bytes / 4096) ? 0 : 4;
}
