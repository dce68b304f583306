#include "grading/kit_build.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "grading/run_failure.h"
#include "grading/jail/sandbox.h"
#include "grading/text.h"
#include "grading/trace.h"
#include "tools/student_kit.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

// What a student needs from Bazel's output: the compiler's lines about their files, or
// the linker's, without the kit's absolute paths.
// A line of the compiler's or linker's diagnostics (not Bazel's dump of the command line
// or its sandbox's debug lines).
bool CompilerLine(const std::string& line, const std::string& student_dir) {
  if (line.find("linux-sandbox") != std::string::npos || line.find("execroot/") != std::string::npos) return false;
  if (line.find(student_dir) != std::string::npos) return true;
  size_t i = line.find_first_not_of(' ');
  if (i == std::string::npos) return false;
  // gcc's source excerpts: "   34 |     mean.div_(world)" and "      |                     ^".
  size_t j = line.find_first_not_of("0123456789 ", i);
  if (j != std::string::npos && line[j] == '|') return true;
  for (const char* key : {"error:", "Error:", "Assembler messages", "warning:", "note:", "In function", "In member function", "In file included",
                          "undefined reference", "multiple definition", "collect2", "ld returned"}) {
    if (line.find(key) != std::string::npos) return std::isdigit(static_cast<unsigned char>(line[i])) == 0;
  }
  return false;
}

std::string CompileErrors(const std::string& output, const std::string& kit, const stages::Row& st) {
  // Bazel reports each failed action as "ERROR: <pkg>/BUILD:<line>:<col>: Compiling ... failed:
  // (Exit 1): gcc failed: error executing command <the whole command line>", then the
  // compiler's or linker's own lines. Keep the blocks of this task's package.
  std::string out;
  size_t taken = 0;
  const std::string build_file = st.id + "/BUILD:", student_dir = st.id + "/student/";
  bool in_block = false;
  for (auto line : Lines(output)) {
    for (size_t p; (p = line.find(kit + "/")) != std::string::npos;) line.erase(p, kit.size() + 1);
    // The assembler names its input, a temporary file: "/.../tmp/ccX.s:7: Error: file not found: F".
    if (size_t s = line.find(".s:"); s != std::string::npos && line.find(' ') > s && line[0] == '/') {
      line = "assembler" + line.substr(s + 2);
    }
    const bool header = line.rfind("ERROR: ", 0) == 0;
    if (header) {
      in_block = line.find(build_file) != std::string::npos || line.find(student_dir) != std::string::npos;
      if (auto exit = line.find(" (Exit "); exit != std::string::npos) {
        line = line.substr(0, line.find(')', exit) + 1);
      }
    } else if (line.rfind("INFO:", 0) == 0 || line.rfind("Target ", 0) == 0 || line.rfind("FAILED:", 0) == 0 ||
               line.rfind("WARNING:", 0) == 0) {
      in_block = false;
    }
    if (in_block && taken < 40 && (header || CompilerLine(line, student_dir))) {
      out += QuotedLine(line) + "\n";
      ++taken;
    }
  }
  if (out.empty()) out = Tail(output, 25);
  return "\n" + out;
}

}  // namespace

std::map<std::string, BuildOutcome> BuildSubmission(const GraderConfig& config,
                                                    const std::vector<const stages::Row*>& graded,
                                                    const Submission& sub, const std::map<std::string, Prebuilt>& prebuilt,
                                                    StudentSpace* space, std::vector<std::string>* notes) {
  auto progress = [&](const std::string& line) {
    if (config.progress) config.progress(line);
  };
  std::map<std::string, BuildOutcome> out;
  std::vector<const stages::Row*> to_build;
  for (const stages::Row* st : graded) {
    const SubmittedStage& s = sub.stages.at(st->id);
    BuildOutcome& b = out[st->id];
    if (!s.missing.empty()) {
      b.message = "missing from the submission: ";
      for (size_t i = 0; i < s.missing.size(); ++i) b.message += (i ? ", " : "") + st->id + "/" + s.missing[i];
      b.message += "; this task is not built or run";
      continue;
    }
    auto p = prebuilt.find(st->id);
    if (p != prebuilt.end()) {
      b.ok = true;
      b.binary = p->second.binary;
      b.flags = p->second.flags;
      b.message = "used a prebuilt binary (" + fs::path(p->second.binary).filename().string() + ")";
      continue;
    }
    to_build.push_back(st);
  }
  if (to_build.empty()) return out;

  space->Confine();  // throws when the isolation asked for cannot be had
  const std::string kit = space->student_dir() + "/kit";
  progress("preparing a clean student kit in " + kit);
  try {
    if (!config.kit_dir.empty()) {
      fs::copy(config.kit_dir, kit, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
      // A kit that was built in place carries Bazel's convenience links: not ours.
      for (const auto& e : fs::directory_iterator(kit)) {
        if (e.is_symlink() && e.path().filename().string().rfind("bazel-", 0) == 0) fs::remove(e.path());
      }
    } else {
      if (config.source_root.empty()) throw GraderError("no --source or --kit to build the submission in");
      tools::MakeStudentKit({config.source_root, kit, config.kit_revision});
    }
  } catch (const GraderError&) {
    throw;
  } catch (const std::exception& e) {
    throw GraderError(std::string("cannot prepare the student kit: ") + e.what());
  }
  // Tasks 2a-5 train with part 1's step. A submission without part1/ is graded on the
  // grader's part 1 (from the checkout it grades from), so the tasks are judged on their own.
  const auto part1 = sub.stages.find("part1");
  const bool part1_submitted = part1 != sub.stages.end() && part1->second.missing.empty() && !part1->second.files.empty();
  if (!part1_submitted && !config.source_root.empty()) {
    const std::string ref = config.source_root + "/part1/reference/train_step.cc";
    std::error_code ec;
    fs::copy_file(ref, kit + "/part1/student/train_step.cc", fs::copy_options::overwrite_existing, ec);
    if (!ec) notes->push_back("part1/ was not submitted: tasks 2a-5 were built with the grader's part 1");
  }
  const bool lent_part1 = !part1_submitted && !config.source_root.empty();

  // Bazel in batch mode (no server left behind), its output base in the student's folder.
  const std::string output_base = space->student_dir() + "/bazel_output_base";
  auto bazel = [&](const std::vector<std::string>& args, double timeout_s, const PreparedJail* jail) {
    SandboxCommand c;
    // The JVM's heap is capped, so that its reservation fits the build's address-space limit
    // whatever this machine's memory (by default Java reserves a quarter of it).
    c.argv = {config.bazel, "--batch", "--output_base=" + output_base, "--host_jvm_args=-Xmx3g"};
    if (space->confined()) c.argv.push_back("--output_user_root=" + space->student_dir() + "/bazel_user_root");
    c.argv.insert(c.argv.end(), args.begin(), args.end());
    c.working_dir = kit;
    // Bazel inside `bazel test` would take these as its own. LD_LIBRARY_PATH (run_autograder's,
    // for the grader's own LibTorch on the wheel route) would enter every action's key, so the
    // image's build (setup.sh, without it) would not serve a grading's: it compiled the kit again.
    c.unset_env = {"TEST_TMPDIR", "RUNFILES_DIR", "RUNFILES_MANIFEST_FILE", "TEST_SRCDIR", "JAVA_RUNFILES",
                   "BUILD_WORKSPACE_DIRECTORY", "BUILD_WORKING_DIRECTORY", "LD_LIBRARY_PATH"};
    SandboxLimits l;
    l.timeout_s = timeout_s;
    l.max_output_bytes = 512 * 1024;
    l.file_size_bytes = int64_t{2} << 30;
    l.jail = jail;
    // Student code's build: every process (the JVM, the compiler on the submitted files) under
    // an address-space limit, as a run's are.
    if (jail != nullptr) l.address_space_bytes = config.build_memory_limit_bytes;
    return RunSandboxed(c, l);
  };
  std::vector<std::string> targets;
  std::string said;
  for (const stages::Row* st : to_build) {
    targets.push_back("//" + st->id + ":student");
    said += (said.empty() ? "" : " ") + targets.back();
  }
  const std::vector<std::string> common = {"build", "--keep_going", "--color=no", "--curses=no",
                                           "--show_progress_rate_limit=60"};
  std::vector<std::string> cache_flag;
  if (!space->disk_cache().empty()) cache_flag.push_back("--disk_cache=" + space->disk_cache());

  // In a jail the student's Bazel cannot write to the grader's disk cache, so the kit as it is
  // (instructor code only) is built first as the grader: that fills the cache for the next
  // grading and this output base for the student's build, which then compiles only the
  // submitted files. (Action keys hold the PATH, so a cache filled elsewhere may not serve.)
  if (space->confined()) {
    progress("building the clean kit as the grader (its libraries, for the build of the submitted files)");
    std::vector<std::string> args = common;
    if (!space->grader_disk_cache().empty()) args.push_back("--disk_cache=" + space->grader_disk_cache());
    args.insert(args.end(), targets.begin(), targets.end());
    SandboxResult warm = bazel(args, std::max(config.kit_build_timeout_s, config.build_timeout_s), nullptr);
    if (warm.exit_code != 0) {
      notes->push_back("the clean kit did not build as the grader (exit " + std::to_string(warm.exit_code) +
                       "); the submission's build starts from the disk cache:\n" + Tail(warm.output, 10));
    }
  }
  // The stubs' binaries that build left behind go: a task's binary must exist only if the build
  // of the submitted files made it (a file that does not compile leaves no link to run).
  for (const stages::Row* st : to_build) {
    std::error_code ec;
    fs::remove(kit + "/bazel-bin/" + st->id + "/student", ec);
  }
  for (const stages::Row* st : to_build) {
    for (const auto& [name, path] : sub.stages.at(st->id).files) {
      const std::string dst = kit + "/" + st->id + "/student/" + name;
      std::error_code ec;
      fs::create_directories(fs::path(dst).parent_path(), ec);
      fs::copy_file(path, dst, fs::copy_options::overwrite_existing, ec);
      if (ec) throw GraderError("cannot copy " + path + " into the kit: " + ec.message());
    }
  }
  space->GiveToStudent(kit);
  space->GiveToStudent(output_base);
  space->GiveToStudent(space->student_dir() + "/bazel_user_root");

  // One build of every task's binary: one analysis, links in parallel, and with
  // --keep_going a task that does not compile does not stop the others. In a jail the jail is
  // the sandbox, so actions run locally.
  std::vector<std::string> args = common;
  if (space->confined()) args.push_back("--spawn_strategy=local");
  args.insert(args.end(), cache_flag.begin(), cache_flag.end());
  args.insert(args.end(), targets.begin(), targets.end());
  progress("building " + said + " in the kit with the submitted files");
  SandboxResult r = bazel(args, config.build_timeout_s, space->build_jail());
  // The grader's part 1 is compiled in; its source does not stay where the runs can read it.
  if (lent_part1) {
    std::error_code ec;
    fs::remove(kit + "/part1/student/train_step.cc", ec);
  }
  if (r.disk_limit_hit) notes->push_back("the build was stopped: " + DiskLimitMessage(r.inode_limit_hit, config));
  for (const stages::Row* st : to_build) {
    BuildOutcome& b = out[st->id];
    b.from_kit = true;
    const std::string target = "//" + st->id + ":student";
    // Removed after the grader's build of the stubs: the binary exists only if this build made it.
    const std::string binary = kit + "/bazel-bin/" + st->id + "/student";
    if (!r.timed_out && access(binary.c_str(), X_OK) == 0) {
      b.ok = true;
      b.binary = binary;
      b.message = "built " + target + " on a clean student kit (the build of all tasks took " +
                  Fmt("%.0f", r.seconds) + " s)";
    } else if (r.timed_out) {
      b.message = "the build did not finish within " + Fmt("%.0f", config.build_timeout_s) + " s and was stopped";
    } else if (r.disk_limit_hit) {
      b.message = "the build was stopped: " + DiskLimitMessage(r.inode_limit_hit, config);
    } else {
      b.message = "does not compile: " + CompileErrors(r.output, kit, *st);
    }
  }
  return out;
}

}  // namespace distlm::grading
