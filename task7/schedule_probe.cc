#include "task7/schedule_probe.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "task7/pipeline_schedule.h"

namespace distlm::task7 {
namespace {

std::string ArgValue(int argc, char** argv, const std::string& name) {
  const std::string prefix = name + "=";
  std::string value;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind(prefix, 0) == 0) value = a.substr(prefix.size());
  }
  return value;
}

}  // namespace

bool RunScheduleProbeIfAsked(int argc, char** argv, StageStepsFunction steps, int* exit_code) {
  const std::string probe = ArgValue(argc, argv, "--schedule_probe");
  if (probe.empty()) return false;
  *exit_code = 2;
  // Under a launcher every rank is asked; rank 0 answers.
  if (const char* rank = std::getenv("RANK"); rank != nullptr && std::string(rank) != "0") {
    *exit_code = 0;
    return true;
  }
  const std::string dir = ArgValue(argc, argv, "--output_dir");
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  std::ofstream out(dir + "/schedule_probe.txt");
  if (dir.empty() || !out) {
    std::fprintf(stderr, "error: --schedule_probe needs a writable --output_dir (got '%s')\n", dir.c_str());
    return true;
  }
  std::istringstream cases(probe);
  for (std::string c; std::getline(cases, c, ',');) {
    char name[8] = {0};
    int stages = 0, micro_batches = 0;
    if (std::sscanf(c.c_str(), "%7[a-z0-9]:%d:%d", name, &stages, &micro_batches) != 3 ||
        (std::string(name) != "afab" && std::string(name) != "1f1b") || stages < 1 || stages > 64 ||
        micro_batches < 1 || micro_batches > 256) {
      std::fprintf(stderr, "error: --schedule_probe: '%s' is not SCHEDULE:STAGES:MICRO_BATCHES (afab or 1f1b)\n",
                   c.c_str());
      return true;
    }
    const PipelineSchedule schedule = std::string(name) == "afab" ? PipelineSchedule::kAllForwardAllBackward
                                                                  : PipelineSchedule::kOneForwardOneBackward;
    for (int s = 0; s < stages; ++s) {
      out << name << " " << stages << " " << micro_batches << " " << s << ": ";
      try {
        out << StepsToString(steps(schedule, stages, s, micro_batches)) << "\n";
      } catch (const std::exception& e) {
        std::string what = e.what();
        for (char& ch : what) ch = ch == '\n' ? ' ' : ch;
        out << "threw: " << what << "\n";
      }
    }
  }
  out.close();
  *exit_code = out ? 0 : 2;
  return true;
}

}  // namespace distlm::task7
