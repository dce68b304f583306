#include "common/dist/slurm_nodelist.h"

#include "absl/strings/str_cat.h"
#include "common/runtime/errors.h"

namespace distlm::dist {

std::string FirstSlurmHost(const std::string& nodelist, const std::string& variable) {
  std::string host;
  size_t i = 0;
  // Up to the first comma outside brackets; each bracket group gives its first element's start.
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] != '[') {
      host += nodelist[i++];
      continue;
    }
    const size_t close = nodelist.find(']', i);
    if (close == std::string::npos) {
      throw UserError(absl::StrCat("environment variable ", variable, "=\"", nodelist,
                                   "\" (slurm): a '[' that no ']' closes"));
    }
    const std::string group = nodelist.substr(i + 1, close - i - 1);
    const std::string first = group.substr(0, group.find_first_of(",-"));
    if (first.empty()) {
      throw UserError(absl::StrCat("environment variable ", variable, "=\"", nodelist,
                                   "\" (slurm): an empty range in brackets"));
    }
    host += first;
    i = close + 1;
  }
  if (host.empty()) {
    throw UserError(absl::StrCat("environment variable ", variable, "=\"", nodelist, "\" (slurm) names no host"));
  }
  return host;
}

int SlurmMasterPort(long long job_id) { return 10000 + static_cast<int>(job_id % 20000); }

}  // namespace distlm::dist
