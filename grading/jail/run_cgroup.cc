#include "grading/jail/run_cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace distlm::grading {
namespace {

std::string ReadSmall(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Where each hierarchy's group of this process lies in the file system: controller name ("" for
// the unified v2 tree) -> folder. From /proc/self/cgroup (the group's path) and mountinfo (where
// each hierarchy is mounted, and which of its groups is the mount's root).
std::map<std::string, std::string> OwnGroupFolders() {
  std::map<std::string, std::string> path_of;  // controller -> group path
  std::istringstream groups(ReadSmall("/proc/self/cgroup"));
  for (std::string line; std::getline(groups, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) path_of[""] = path;
    std::istringstream names(controllers);
    for (std::string n; std::getline(names, n, ',');) path_of[n] = path;
  }
  std::map<std::string, std::string> out;
  std::istringstream mounts(ReadSmall("/proc/self/mountinfo"));
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point, word;
    f >> id >> parent >> dev >> root >> point;
    while (f >> word && word != "-") {
    }
    std::string type, source, options;
    f >> type >> source >> options;
    std::vector<std::string> keys;
    if (type == "cgroup2") keys.push_back("");
    if (type == "cgroup") {
      std::istringstream o(options);
      for (std::string n; std::getline(o, n, ',');) keys.push_back(n);
    }
    for (const auto& k : keys) {
      auto it = path_of.find(k);
      if (it == path_of.end() || out.count(k) != 0) continue;
      const std::string& path = it->second;
      if (root != "/" && path.rfind(root, 0) != 0) continue;  // a mount of another part of the tree
      out[k] = point + (root == "/" ? path : path.substr(root.size()));
      while (out[k].size() > 1 && out[k].back() == '/') out[k].pop_back();
    }
  }
  return out;
}

std::string NewName() {
  static std::atomic<int> counter{0};
  return "distlm-run-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

bool MakeGroup(const std::string& parent, const std::string& name, std::string* dir, std::string* why) {
  *dir = parent + "/" + name;
  if (mkdir(dir->c_str(), 0755) != 0) {
    *why = "cannot make a control group in " + parent + ": " + strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

RunCgroup::RunCgroup() {
  if (geteuid() != 0) {
    why_not_ = "the grader is not root, so it cannot give a run a control group of its own";
    return;
  }
  const std::map<std::string, std::string> own = OwnGroupFolders();
  const std::string name = NewName();
  std::string dir;
  if (own.count("memory") != 0 && own.count("cpuacct") != 0) {  // cgroup v1
    for (const char* c : {"memory", "cpuacct"}) {
      if (!MakeGroup(own.at(c), name, &dir, &why_not_)) return;
      dirs_.push_back(dir);
      procs_.push_back(dir + "/cgroup.procs");
    }
    memory_stat_ = dirs_[0] + "/memory.stat";
    cpu_file_ = dirs_[1] + "/cpuacct.usage";
  } else if (own.count("") != 0) {  // the unified tree
    v2_ = true;
    const std::string& parent = own.at("");
    {
      // The controller may be on already, or refused (a group with processes of its own cannot
      // hand controllers down); the child's memory.stat tells.
      std::ofstream enable(parent + "/cgroup.subtree_control");
      enable << "+memory";
    }
    if (!MakeGroup(parent, name, &dir, &why_not_)) return;
    dirs_.push_back(dir);
    procs_.push_back(dir + "/cgroup.procs");
    memory_stat_ = dir + "/memory.stat";
    cpu_file_ = dir + "/cpu.stat";
    if (access(memory_stat_.c_str(), R_OK) != 0) {
      why_not_ = "the cgroup v2 tree here does not hand the memory controller down to " + parent;
      return;  // the destructor removes the group
    }
  } else {
    why_not_ = "no cgroup file system with memory and CPU accounting is mounted";
    return;
  }
  made_ = true;
}

RunCgroup::~RunCgroup() {
  for (const auto& d : dirs_) {
    // The run's last processes may still be on their way out after SIGKILL.
    for (int i = 0; i < 200 && rmdir(d.c_str()) != 0 && errno == EBUSY; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

int RunCgroup::Join() const {
  if (!made_) return 0;
  for (const auto& p : procs_) {
    const int fd = open(p.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    const bool ok = write(fd, "0", 1) == 1;  // 0: the writing process
    const int err = errno;
    close(fd);
    if (!ok) return err != 0 ? err : EIO;
  }
  return 0;
}

void RunCgroup::Sample() {
  if (!made_) return;
  std::istringstream stat(ReadSmall(memory_stat_));
  int64_t in_use = 0;
  bool read = false;
  // v1's rss is anonymous memory (v2's anon); shmem is tmpfs, /dev/shm and memfd in both.
  const std::string anon = v2_ ? "anon" : "rss";
  for (std::string key; stat >> key;) {
    int64_t value = 0;
    if (!(stat >> value)) break;
    if (key == anon || key == "shmem") {
      in_use += value;
      read = true;
    }
  }
  if (read && in_use > memory_peak_) memory_peak_ = in_use;
}

double RunCgroup::CpuSeconds() const {
  if (!made_) return -1;
  std::istringstream in(ReadSmall(cpu_file_));
  if (!v2_) {
    int64_t ns = -1;
    return in >> ns && ns >= 0 ? static_cast<double>(ns) / 1e9 : -1;
  }
  for (std::string key; in >> key;) {
    int64_t value = 0;
    if (!(in >> value)) break;
    if (key == "usage_usec") return static_cast<double>(value) / 1e6;
  }
  return -1;
}

}  // namespace distlm::grading
