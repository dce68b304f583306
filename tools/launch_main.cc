// launch: start N ranks of a command on this host, as `torchrun --standalone` does.
//
//   bazel run //tools:launch -- --nproc_per_node=2 -- bazel-bin/task2b/reference --max_steps=5
//
// Everything after `--` is the command; the flags before it are the launcher's. See
// tools/launcher.h for the environment each rank gets, the output format and the exit codes.
#include <sys/prctl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "common/runtime/errors.h"
#include "tools/launcher.h"
#include "tools/no_spawn.h"

ABSL_FLAG(int, nproc_per_node, 1, "ranks to start on this host (1..256)");
ABSL_FLAG(std::string, master_addr, "127.0.0.1", "MASTER_ADDR given to every rank");
ABSL_FLAG(int, master_port, 0, "MASTER_PORT given to every rank; 0 = pick a free port on --master_addr");
ABSL_FLAG(double, timeout_s, 0,
          "when > 0, stop every rank after this many seconds and exit 124 naming the ranks still "
          "running; 0 = no limit");
ABSL_FLAG(double, grace_s, 5, "when stopping ranks, seconds between SIGTERM and SIGKILL");
ABSL_FLAG(std::string, tee, "", "if set, also write rank R's output (unprefixed) to DIR/rank_R.log");
ABSL_FLAG(std::vector<std::string>, join_ranks, {},
          "ranks (comma-separated) that each also get a joiner: a second process of that rank, its command with --join "
          "added, started with the others; the rank's end then does not end the job (task 8's --elastic workers)");
ABSL_FLAG(bool, no_spawn, false,
          "ranks may not start processes or execute programs (a seccomp filter, tools/no_spawn.h; threads are "
          "fine); the grader runs every submission this way, and you can check yours with it");

namespace {

int Main(int argc, char** argv) {
  // Split at the first "--" ourselves: the command's own flags must never reach absl.
  int split = 1;
  while (split < argc && std::string(argv[split]) != "--") ++split;
  std::vector<std::string> command(argv + std::min(split + 1, argc), argv + argc);
  std::vector<char*> launcher_args(argv, argv + split);
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(launcher_args.size()), launcher_args.data());
  if (positional.size() > 1) {
    throw distlm::UserError(std::string("unexpected argument '") + positional[1] +
                            "' before '--': usage: launch --nproc_per_node=N [flags] -- BINARY [ARGS...]");
  }
  if (split == argc) {
    throw distlm::UserError("no '--' before the command: usage: launch --nproc_per_node=N [flags] -- BINARY [ARGS...]");
  }

  distlm::tools::LaunchOptions options;
  options.nproc_per_node = absl::GetFlag(FLAGS_nproc_per_node);
  options.master_addr = absl::GetFlag(FLAGS_master_addr);
  options.master_port = absl::GetFlag(FLAGS_master_port);
  options.timeout_s = absl::GetFlag(FLAGS_timeout_s);
  options.grace_s = absl::GetFlag(FLAGS_grace_s);
  options.tee_dir = absl::GetFlag(FLAGS_tee);
  options.command = command;
  for (const std::string& r : absl::GetFlag(FLAGS_join_ranks)) {
    int rank = -1;
    if (!absl::SimpleAtoi(r, &rank)) throw distlm::UserError("--join_ranks: '" + r + "' is not a rank number");
    options.join_ranks.push_back(rank);
  }
  // `bazel run` starts us in the runfiles tree; the user's paths are relative to where they
  // typed the command, which Bazel passes here.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr && *dir != '\0') {
    options.working_dir = dir;
  }
  // --no_spawn: the ranks get a filter that lets each execute its program once and start no
  // process after; the launcher, once they run, gets one that lets it start nothing. It is not
  // dumpable, so no rank can read the filter's secret out of it or write into its memory.
  std::optional<distlm::tools::NoSpawnFilter> rank_filter, own_filter;
  if (absl::GetFlag(FLAGS_no_spawn)) {
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) throw std::runtime_error("--no_spawn: prctl(PR_SET_DUMPABLE) failed");
    rank_filter = distlm::tools::NoSpawnFilter::ExecOnce();
    own_filter = distlm::tools::NoSpawnFilter::NoExec();
    options.exec_rank = &distlm::tools::NoSpawnFilter::ExecHook;
    options.exec_rank_arg = &*rank_filter;
    options.after_start = [](const void* arg) {
      if (int err = static_cast<const distlm::tools::NoSpawnFilter*>(arg)->Install(); err != 0) {
        std::fprintf(stderr, "launch: --no_spawn: cannot confine the launcher itself: %s\n", std::strerror(err));
      }
    };
    options.after_start_arg = &*own_filter;
  }
  return distlm::tools::Launch(options);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "starts N ranks of a command on this host with torchrun's variables set.\n"
      "usage: launch --nproc_per_node=N [--master_addr=A] [--master_port=P] [--timeout_s=T]\n"
      "              [--grace_s=G] [--tee=DIR] [--join_ranks=R,...] [--no_spawn] -- BINARY [ARGS...]");
  return distlm::RunMain([&] { return Main(argc, argv); });
}
