// ProbeIsolation: which jail this machine allows, found by running /bin/true in each.
#include <unistd.h>

#include <string>

#include "grading/jail/sandbox.h"

namespace distlm::grading {

IsolationProbe ProbeIsolation() {
  IsolationProbe probe;
  std::string error;
  if (!FindJailUser(&probe.user, &error)) {
    probe.why_not_user = probe.why_not_full = error;
    return probe;
  }
  if (geteuid() != 0) {
    probe.why_not_user = "the grader runs as uid " + std::to_string(geteuid()) +
                         ", not root, so it cannot run student code as another user";
    probe.why_not_full = probe.why_not_user;
    return probe;
  }
  auto attempt = [&](Isolation level) -> std::string {
    JailSpec spec;
    spec.level = level;
    spec.user = probe.user;
    spec.private_tmp = {"/tmp"};
    PreparedJail jail(spec);
    SandboxCommand c;
    c.argv = {"/bin/true"};
    c.working_dir = "/";
    SandboxLimits limits;
    limits.timeout_s = 30;
    limits.jail = &jail;
    const SandboxResult r = RunSandboxed(c, limits);
    if (!r.jail_error.empty()) return r.jail_error;
    return r.exit_code == 0 ? "" : "a jailed /bin/true exited with " + std::to_string(r.exit_code) + ": " + r.output;
  };
  probe.why_not_full = attempt(Isolation::kFull);
  if (probe.why_not_full.empty()) {
    probe.best = Isolation::kFull;
    return probe;
  }
  probe.why_not_full += " (a container needs CAP_SYS_ADMIN for namespaces: docker run --cap-add=SYS_ADMIN)";
  probe.why_not_user = attempt(Isolation::kUser);
  if (probe.why_not_user.empty()) probe.best = Isolation::kUser;
  return probe;
}

}  // namespace distlm::grading
