#include "common/train/run_dir.h"

#include <dirent.h>

#include <cstdio>
#include <ctime>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/runtime/runfiles.h"
#include "common/train/snapshot.h"

namespace distlm::train {
namespace {

// The names in `dir` other than . and .. (none when it cannot be opened).
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (auto* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

std::string Timestamp() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", std::localtime(&now));
  return buf;
}

}  // namespace

std::string ResolveOutputDir(const std::string& given, const std::string& stage) {
  if (!given.empty()) return given;
  return UserWorkingDirectory() + "/distlm_output/" + stage + "/" + Timestamp();
}

void PrepareRunDir(const std::string& dir, bool training, bool overwrite) {
  if (training && PathExists(dir) && !Entries(dir).empty()) {
    if (overwrite) {
      for (const char* f : {"train_log.jsonl", "eval_results.json"}) std::remove((dir + "/" + f).c_str());
      for (const auto& name : Entries(dir + "/snapshots")) std::remove((dir + "/snapshots/" + name).c_str());
    } else if (!HasSnapshots(dir)) {
      throw UserError("--output_dir=" + dir + " exists and is not empty; pass --overwrite_output_dir to start afresh");
    }
    // Otherwise a snapshot is there: the Trainer resumes from it.
  }
  MakeDirs(dir);
}

void WriteTrainingArgs(const std::string& dir, const nlohmann::json& args) {
  WriteFileAtomically(dir + "/training_args.json", args.dump(2) + "\n");
}

}  // namespace distlm::train
