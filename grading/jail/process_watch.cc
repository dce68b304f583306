#include "grading/jail/process_watch.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <map>
#include <string>
#include <vector>

namespace distlm::grading {
namespace {

// The program file a process runs (PROC_DIR/exe, followed), to tell two processes' programs apart.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool ok = false;
};
// The folders of a process's threads (PROC_DIR/task/TID).
std::vector<std::string> TaskDirs(const std::string& proc_dir) {
  std::vector<std::string> out;
  DIR* tasks = opendir((proc_dir + "/task").c_str());
  if (tasks == nullptr) return out;
  while (dirent* e = readdir(tasks)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') out.push_back(proc_dir + "/task/" + e->d_name);
  }
  closedir(tasks);
  return out;
}

// A process whose first thread has ended (pthread_exit in main) while others run keeps that
// thread as a zombie: its exe and Vm* lines are gone, its other threads' are not.
FileId ExeOf(const std::string& proc_dir) {
  struct stat st;
  if (::stat((proc_dir + "/exe").c_str(), &st) == 0) return {st.st_dev, st.st_ino, true};
  for (const std::string& task : TaskDirs(proc_dir)) {
    if (::stat((task + "/exe").c_str(), &st) == 0) return {st.st_dev, st.st_ino, true};
  }
  return {};
}

// VmHWM less RssFile from a status file, in bytes, or -1 (see OwnMemoryPeakOf).
int64_t OwnPeakIn(const std::string& status_file) {
  std::ifstream in(status_file);
  std::string line;
  int64_t hwm_kb = -1, file_kb = -1;
  while (std::getline(in, line) && (hwm_kb < 0 || file_kb < 0)) {
    // "VmHWM:\t  123456 kB"
    if (line.rfind("VmHWM:", 0) == 0) hwm_kb = std::strtoll(line.c_str() + 6, nullptr, 10);
    if (line.rfind("RssFile:", 0) == 0) file_kb = std::strtoll(line.c_str() + 8, nullptr, 10);
  }
  if (hwm_kb < 0) return -1;
  return (hwm_kb - std::max<int64_t>(file_kb, 0)) * 1024;
}

// Every process of the machine: pid -> parent pid, read from /proc/PID/stat (its fourth field,
// after the command name, which is in parentheses and may hold anything, parentheses too), and
// with `owners`, pid -> its user.
std::map<pid_t, pid_t> ParentsOfAll(std::map<pid_t, uid_t>* owners) {
  std::map<pid_t, pid_t> parents;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return parents;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    const std::string dir = std::string("/proc/") + e->d_name;
    std::ifstream in(dir + "/stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    const size_t close = line.rfind(')');
    if (close == std::string::npos || close + 4 >= line.size()) continue;
    // ") S PPID ...": skip the state.
    const long ppid = std::strtol(line.c_str() + close + 4, nullptr, 10);
    parents[static_cast<pid_t>(pid)] = static_cast<pid_t>(ppid);
    struct stat st;
    if (owners != nullptr && ::stat(dir.c_str(), &st) == 0) (*owners)[static_cast<pid_t>(pid)] = st.st_uid;
  }
  closedir(proc);
  return parents;
}

}  // namespace

int64_t OwnMemoryPeakOf(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  int64_t most = OwnPeakIn(dir + "/status");
  if (most >= 0) return most;
  // The threads share one memory: any live one has its mark.
  for (const std::string& task : TaskDirs(dir)) most = std::max(most, OwnPeakIn(task + "/status"));
  return most;
}

double CpuSecondsOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return -1;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  // After the command name: state (field 3), ... utime (14) and stime (15), in clock ticks.
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  double ticks = 0;
  for (int n = 3; n <= 15 && fields >> field; ++n) {
    if (n >= 14) ticks += std::strtod(field.c_str(), nullptr);
    if (n == 15) {
      static const long per_second = sysconf(_SC_CLK_TCK);
      return per_second > 0 ? ticks / static_cast<double>(per_second) : -1;
    }
  }
  return -1;
}

ProcessWatch::ProcessWatch(pid_t root, int64_t uid) : root_(root), uid_(uid) {}

void ProcessWatch::Rescan() {
  std::map<pid_t, uid_t> owners;
  const std::map<pid_t, pid_t> parents = ParentsOfAll(uid_ >= 0 ? &owners : nullptr);
  // The command's tree: the root and every process whose chain of parents reaches it.
  std::set<pid_t> tree = {root_};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [pid, ppid] : parents) {
      if (tree.count(pid) == 0 && tree.count(ppid) != 0) grew = tree.insert(pid).second;
    }
  }
  for (const auto& [pid, owner] : owners) {
    if (static_cast<int64_t>(owner) == uid_) tree.insert(pid);
  }
  // Not the grader's own forks that have not executed anything (the sandbox's child before its
  // exec, a PID namespace's waiting parent and its init): their pages are copies of the
  // grader's, not the command's.
  static const FileId self = ExeOf("/proc/self");
  for (pid_t pid : tree) {
    const FileId exe = ExeOf("/proc/" + std::to_string(pid));
    if (!exe.ok || (self.ok && exe.dev == self.dev && exe.ino == self.ino)) continue;
    watched_.insert(pid);
  }
}

void ProcessWatch::Sample() {
  if (calls_++ % 5 == 0) Rescan();
  std::vector<pid_t> gone;
  for (pid_t pid : watched_) {
    const int64_t now = OwnMemoryPeakOf(pid);
    if (now < 0) {
      gone.push_back(pid);
      continue;
    }
    if (now > peak_bytes_) peak_bytes_ = now;
    const double cpu = CpuSecondsOf(pid);
    if (cpu > peak_cpu_seconds_) peak_cpu_seconds_ = cpu;
  }
  // An ended process's number can come back as another's: it is found again by a rescan if it
  // belongs here.
  for (pid_t pid : gone) watched_.erase(pid);
}

}  // namespace distlm::grading
