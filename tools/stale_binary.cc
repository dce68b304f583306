#include "tools/stale_binary.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace distlm::tools {

namespace fs = std::filesystem;

std::optional<std::string> StaleBinaryWarning(const std::string& executable, const std::string& workspace) {
  std::error_code ec;
  const fs::path real = fs::canonical(executable, ec);
  if (ec || workspace.empty()) return std::nullopt;
  // .../bazel-out/<config>/bin/<package...>/<name>
  const std::string s = real.string();
  const size_t out = s.find("/bazel-out/");
  if (out == std::string::npos) return std::nullopt;
  const size_t bin = s.find("/bin/", out + 11);
  if (bin == std::string::npos) return std::nullopt;
  const fs::path target = s.substr(bin + 5);  // package/name
  const fs::path package = target.parent_path();
  if (package.empty()) return std::nullopt;
  const fs::path dir = fs::path(workspace) / package;
  if (!fs::is_directory(dir, ec)) return std::nullopt;

  const auto built = fs::last_write_time(real, ec);
  if (ec) return std::nullopt;
  fs::path newest;
  auto newest_time = built;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind('.', 0) == 0 || name.rfind("bazel-", 0) == 0) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    const auto t = it->last_write_time(ec);
    if (!ec && t > newest_time) newest_time = t, newest = it->path();
  }
  if (newest.empty()) return std::nullopt;
  return "launch: warning: " + executable + " was built before " +
         fs::relative(newest, workspace, ec).string() + " last changed; the ranks will run the old build (bazel build //" +
         package.string() + ":" + target.filename().string() + " first)";
}

std::string FindWorkspace(const std::string& start) {
  if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY"); ws != nullptr && *ws != '\0') return ws;
  std::error_code ec;
  for (fs::path p = fs::absolute(start.empty() ? "." : start, ec); !ec && !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / "WORKSPACE", ec)) {
      // A runfiles tree (a test, `bazel run`'s own tree) mirrors the workspace with links; its
      // binaries are what Bazel just built, and its files are not the user's sources.
      return p.string().find(".runfiles") == std::string::npos ? p.string() : "";
    }
    if (p == p.parent_path()) break;
  }
  return "";
}

}  // namespace distlm::tools
