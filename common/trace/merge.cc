#include "common/trace/merge.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/runtime/errors.h"

namespace distlm::trace {

namespace fs = std::filesystem;

nlohmann::json MergeRankTraces(const std::string& trace_dir) {
  std::error_code ec;
  if (!fs::is_directory(trace_dir, ec)) {
    throw UserError(trace_dir + " is not a folder (a run with --trace writes OUTPUT_DIR/trace/)");
  }
  std::map<int, std::pair<std::string, nlohmann::json>> by_rank;
  int world = -1;
  for (const auto& e : fs::directory_iterator(trace_dir, ec)) {
    const std::string name = e.path().filename().string();
    int r = -1, n = -1;
    char tail[8] = {0};
    if (std::sscanf(name.c_str(), "rank-%d-of-%d.%5s", &r, &n, tail) != 3 || std::string(tail) != "json") continue;
    if (world != -1 && n != world) {
      throw UserError(trace_dir + " holds traces of " + std::to_string(world) + " and of " + std::to_string(n) +
                      " ranks (" + name + "): two runs in one folder? Keep one run's files");
    }
    world = n;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json t = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (!in || !t.is_object() || !t.contains("traceEvents") || !t["traceEvents"].is_array()) {
      throw UserError(e.path().string() + " is not a Chrome trace (unreadable, or no traceEvents array)");
    }
    by_rank[r] = {e.path().string(), std::move(t)};
  }
  if (world < 1) throw UserError("no rank-R-of-N.json in " + trace_dir + " (was the run started with --trace?)");
  for (int r = 0; r < world; ++r) {
    if (by_rank.count(r) == 0) {
      throw UserError(trace_dir + " lacks rank-" + std::to_string(r) + "-of-" + std::to_string(world) +
                      ".json (on a cluster, each host writes its ranks' files: copy them into one folder)");
    }
  }
  nlohmann::json events = nlohmann::json::array(), clocks = nlohmann::json::array();
  const nlohmann::json& first = by_rank.at(0).second["otherData"];
  for (auto& [rank, file] : by_rank) {
    auto& [path, t] = file;
    const nlohmann::json other = t.value("otherData", nlohmann::json::object());
    for (const char* key : {"stage", "updates"}) {
      if (other.value(key, nlohmann::json()) != first.value(key, nlohmann::json())) {
        throw UserError(path + " says " + key + " " + other.value(key, nlohmann::json()).dump() + ", rank 0's file " +
                        first.value(key, nlohmann::json()).dump() + ": the files are not of one run");
      }
    }
    clocks.push_back(other.value("clock", nlohmann::json::object()));
    for (auto& e : t["traceEvents"]) events.push_back(std::move(e));
  }
  nlohmann::json other = first;
  other.erase("rank");
  other.erase("clock");
  other["world_size"] = world;
  other["clocks"] = clocks;
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", std::move(other)}};
}

}  // namespace distlm::trace
