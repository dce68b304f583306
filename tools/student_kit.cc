#include "tools/student_kit.h"

#include <stdlib.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "common/runtime/errors.h"

namespace distlm::tools {
namespace {

namespace fs = std::filesystem;

std::string Dirname(const std::string& path) {
  auto pos = path.rfind('/');
  return pos == std::string::npos ? "" : path.substr(0, pos);
}

std::string Join(const std::string& dir, const std::string& name) { return dir.empty() ? name : dir + "/" + name; }

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteWhole(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  if (!out) throw UserError("cannot write " + path);
}

bool IsBuildFile(const std::string& rel) {
  std::string base = rel.substr(rel.rfind('/') + 1);
  return base == "BUILD" || base == "BUILD.bazel";
}

std::string ShellQuote(const std::string& s) {
  std::string quoted = "'";
  for (char c : s) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// A command's standard output; nullopt when it fails.
std::optional<std::string> CommandOutput(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string all;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) all.append(buf, n);
  if (pclose(p) != 0) return std::nullopt;
  return all;
}

// Every file below root, without .git and Bazel's convenience links.
std::vector<std::string> WalkFiles(const std::string& root) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end; it != end;
       it.increment(ec)) {
    if (ec) throw UserError("cannot read " + root + ": " + ec.message());
    std::string rel = it->path().lexically_relative(root).generic_string();
    std::string first = SplitPath(rel).empty() ? "" : SplitPath(rel)[0];
    if (first == ".git" || first.rfind("bazel-", 0) == 0) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_directory(ec)) files.push_back(rel);
  }
  return files;
}

// Where the kit's files are read from: a git revision unpacked into a staging folder (removed
// with this object), the working tree's tracked files, or, without git, every file.
struct Source {
  std::string root;
  std::vector<std::string> files;
  std::string staging;
  ~Source() {
    if (!staging.empty()) {
      std::error_code ec;
      fs::remove_all(staging, ec);
    }
  }
};

void ReadSource(const std::string& checkout, const std::string& revision, Source* src,
                std::vector<std::string>* notes) {
  src->root = checkout;
  const bool git = fs::exists(checkout + "/.git");
  if (git && !revision.empty()) {
    auto hash = CommandOutput("git -C " + ShellQuote(checkout) + " rev-parse --short " + ShellQuote(revision + "^{commit}") +
                              " 2>/dev/null");
    if (!hash) throw UserError("--revision: " + revision + " is not a commit of " + checkout);
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/student_kit_sourceXXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw UserError("cannot create a staging folder " + tmpl);
    src->staging = tmpl;
    const std::string tar = src->staging + "/source.tar", tree = src->staging + "/tree";
    fs::create_directories(tree);
    if (!CommandOutput("git -C " + ShellQuote(checkout) + " archive --format=tar -o " + ShellQuote(tar) + " " +
                       ShellQuote(revision) + " 2>&1") ||
        !CommandOutput("tar -xf " + ShellQuote(tar) + " -C " + ShellQuote(tree) + " 2>&1")) {
      throw UserError("cannot unpack " + revision + " of " + checkout + " (git archive | tar)");
    }
    src->root = tree;
    src->files = WalkFiles(tree);
    std::string h = *hash;
    while (!h.empty() && h.back() == '\n') h.pop_back();
    notes->push_back("made from " + revision + " (" + h + ") of " + checkout + "; uncommitted changes are not in the kit");
    return;
  }
  if (git) {
    if (auto listing = CommandOutput("git -C " + ShellQuote(checkout) + " ls-files -z 2>/dev/null")) {
      size_t start = 0;
      for (size_t i = 0; i < listing->size(); ++i) {
        if ((*listing)[i] == '\0') {
          src->files.push_back(listing->substr(start, i - start));
          start = i + 1;
        }
      }
      notes->push_back("made from the working tree's tracked files in " + checkout);
      return;
    }
    notes->push_back("git ls-files failed in " + checkout + ": taking every file instead");
  }
  src->files = WalkFiles(checkout);
}

// Source code, which is left out with the rules that alone used it. Documents stay: a
// document a removed test checked is still worth reading.
bool IsCode(const std::string& path) {
  for (const char* ext : {".cc", ".h", ".cpp", ".hpp", ".c", ".cu", ".py", ".sh"}) {
    const std::string e = ext;
    if (path.size() > e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0) return true;
  }
  return false;
}

// --- BUILD files ---------------------------------------------------------------------------

struct Package {
  std::string build_path;  // relative path of its BUILD file
  std::vector<BuildStatement> statements;
  std::vector<bool> removed;
};

// A rule or file of the kit: "pkg:name".
std::string Key(const std::string& package, const std::string& name) { return package + ":" + name; }

}  // namespace

// Helpers of //common/stages:stages.bzl that list the stages' reference solutions: a BUILD
// statement calling one names reference targets without spelling them, so it goes as a
// statement naming one would.
const char* const kPrivateHelpers[] = {"stage_reference_labels", "stage_reference_files", "stage_reference_gradings",
                                       "stage_reference_grading_data", "stage_reference_mutation_suites"};

// Documents for the course staff only (a name ending in / is a folder): the instructor guide lists
// the grader's mutants, its points and how it recognises each mistake, which would turn the
// assignment into a checklist; the architecture and the design notes describe the reference
// solutions' design, and the results are the references' figures with the commands that run
// them; the repository's README presents the whole product, grader included. The
// kit's documents are the handout and its FAQ, and a README of its own (kKitReadme).
const char* const kInstructorOnlyFiles[] = {"README.md", "docs/instructor.md", "docs/architecture.md", "docs/design/",
                                            "docs/results.md"};

// The kit's README.md: what the student has in hand and where to start.
const char kKitReadme[] = R"(# distlm: the course kit

In this course you write, one file at a time, what makes fine-tuning BERT run on several
processes: gradient synchronisation through rank 0 and by all-reduce, a DDP of your own whose
buckets travel while backward still computes, a sharded optimizer (ZeRO), fully sharded data
parallelism, and tensor and pipeline parallelism. Each stage's file starts as a stub that stops
with `TODO(student)`; its local tests say what must hold, and name the property your code breaks.

Start with the handout, `docs/handout/README.md`: the parts in order, what each asks, what you
hand in and how it is graded. `docs/handout/faq.md` answers the usual questions.

```sh
./distlm run     # your part 1 on the built-in demo data (stops at TODO(student) until you write it)
./distlm test    # every local test of the kit
```

Building needs Debian 12 (or the container in `tools/container`); `docs/building.md` says how.
)";

namespace {

// The first private helper `text` calls, or null.
const char* CalledPrivateHelper(const std::string& text) {
  for (const char* helper : kPrivateHelpers) {
    if (CallsFunction(text, helper)) return helper;
  }
  return nullptr;
}

// In the grader's folder or a stage's grading/ folder.
bool IsGradingPath(const std::string& path) {
  auto parts = SplitPath(path);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i] == "grading") return true;
  }
  return false;
}

bool IsInstructorOnlyFile(const std::string& path) {
  for (const std::string file : kInstructorOnlyFiles) {
    if (path == file || (file.back() == '/' && path.rfind(file, 0) == 0)) return true;
  }
  return false;
}

}  // namespace

bool IsPrivatePath(const std::string& path) {
  auto parts = SplitPath(path);
  if (IsInstructorOnlyFile(path)) return true;
  // A folder called reference or grading (the grader's, or a stage's own: its mutants and
  // checks), anywhere (the last part is the file itself).
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i] == "reference" || parts[i] == "grading") return true;
  }
  return false;
}

namespace {

// One kit being made, step by step: which files it keeps, which rules it removes, what it
// writes, and the checks of what it wrote.
class KitMaker {
 public:
  KitMaker(const std::string& root, const std::string& out_dir) : root_(root), out_(out_dir) {}

  // Sorts the source's files into the kit's and the private ones.
  void SortFiles(const std::vector<std::string>& files);
  // Reads the kept BUILD files.
  void ReadPackages();
  // Removes rules that name what is gone, until nothing changes.
  void RemoveRules();
  // Leaves out source files that only removed rules named.
  void DropUnusedSources();
  void Write();
  // Throws when the written kit has a private file, a copy of one, or a dangling label.
  void Check() const;
  // Documents and scripts that still name a removed rule: the kit works, but they mislead.
  void WarnAboutRemovedNames();

  KitReport& report() { return report_; }

 private:
  bool InsidePrivate(const std::string& path) const;
  // Why a kept statement of `pkg` must go ("" if it may stay).
  std::string WhyRemove(const std::string& pkg, const BuildStatement& st) const;
  std::string BuildText(const Package& p) const;

  const std::string root_, out_;
  KitReport report_;
  std::set<std::string> kept_, private_files_, private_dirs_;
  std::map<std::string, Package> packages_;
  std::set<std::string> removed_keys_;
};

void KitMaker::SortFiles(const std::vector<std::string>& files) {
  std::error_code ec;
  for (const auto& f : files) {
    fs::file_status st = fs::symlink_status(root_ + "/" + f, ec);
    if (!fs::exists(st)) {
      report_.left_out.push_back(f + ": tracked but absent from the working tree");
      continue;
    }
    if (IsPrivatePath(f)) {
      private_files_.insert(f);
      report_.left_out.push_back(f + (IsGradingPath(f) ? ": the grader"
                                      : IsInstructorOnlyFile(f)  ? ": for the course staff only"
                                                                 : ": a reference solution (or reference-only code)"));
      // Every folder from the private one down is gone from the kit.
      auto parts = SplitPath(f);
      std::string dir;
      bool inside = false;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        dir = Join(dir, parts[i]);
        inside = inside || parts[i] == "reference" || parts[i] == "grading";
        if (inside) private_dirs_.insert(dir);
      }
      continue;
    }
    if (fs::is_symlink(st) || !fs::is_regular_file(st)) {
      report_.left_out.push_back(f + ": not a regular file");
      continue;
    }
    kept_.insert(f);
  }
}

void KitMaker::ReadPackages() {
  for (const auto& f : kept_) {
    if (!IsBuildFile(f)) continue;
    Package p;
    p.build_path = f;
    p.statements = SplitBuildFile(ReadWhole(root_ + "/" + f));
    p.removed.assign(p.statements.size(), false);
    packages_[Dirname(f)] = std::move(p);
  }
  // What distlm_stage() makes from reference/ is gone from the start: the kit has no
  // reference/ folder, so the macro makes none there.
  for (const auto& [pkg, p] : packages_) {
    for (const auto& st : p.statements) {
      if (st.is_comment_or_blank || !CallsFunction(st.text, kStageMacro)) continue;
      for (const char* n : kStageMacroReferenceTargets) removed_keys_.insert(Key(pkg, n));
    }
  }
}

bool KitMaker::InsidePrivate(const std::string& path) const {
  if (private_files_.count(path) != 0) return true;
  for (std::string d = path; !d.empty(); d = Dirname(d)) {
    if (private_dirs_.count(d) != 0) return true;
  }
  return false;
}

std::string KitMaker::WhyRemove(const std::string& pkg, const BuildStatement& st) const {
  if (const char* helper = CalledPrivateHelper(st.text)) {
    return std::string("calls ") + helper + "(), which lists the stages' reference solutions";
  }
  for (const auto& s : st.strings) {
    Label l;
    if (s == st.name || !ParseLabel(s, pkg, &l)) continue;
    if (InsidePrivate(Join(l.package, l.name)) || InsidePrivate(l.package)) return "uses " + s + ", which the kit leaves out";
    if (removed_keys_.count(Key(l.package, l.name)) != 0) return "depends on " + s + ", removed";
  }
  return "";
}

void KitMaker::RemoveRules() {
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [pkg, p] : packages_) {
      for (size_t i = 0; i < p.statements.size(); ++i) {
        const BuildStatement& st = p.statements[i];
        if (p.removed[i] || st.is_comment_or_blank) continue;
        const std::string why = WhyRemove(pkg, st);
        if (why.empty()) continue;
        p.removed[i] = true;
        changed = true;
        if (!st.name.empty()) removed_keys_.insert(Key(pkg, st.name));
        report_.removed_rules.push_back("//" + pkg + ":" + (st.name.empty() ? "<statement>" : st.name) + " (" + why + ")");
      }
    }
  }
}

void KitMaker::DropUnusedSources() {
  for (auto& [pkg, p] : packages_) {
    std::set<std::string> used_by_kept, used_by_removed;
    for (size_t i = 0; i < p.statements.size(); ++i) {
      for (const auto& s : p.statements[i].strings) {
        Label l;
        if (!ParseLabel(s, pkg, &l) || l.package != pkg) continue;
        (p.removed[i] ? used_by_removed : used_by_kept).insert(l.name);
      }
    }
    for (const auto& name : used_by_removed) {
      const std::string path = Join(pkg, name);
      if (used_by_kept.count(name) == 0 && kept_.count(path) != 0 && IsCode(path)) {
        kept_.erase(path);
        report_.left_out.push_back(path + ": used only by removed rules");
      }
    }
  }
  // A file another package names (a cross-package source label) stays if a kept rule names it:
  // Check() sees to it.
}

// The kept statements of a BUILD file. Blank lines around a removed rule would add up; free
// blocks (blank and comment lines only) lose their leading blank lines after a blank line.
std::string KitMaker::BuildText(const Package& p) const {
  std::string text;
  for (size_t i = 0; i < p.statements.size(); ++i) {
    if (p.removed[i]) continue;
    std::string piece = p.statements[i].text;
    const bool after_blank = text.empty() || (text.size() >= 2 && text.compare(text.size() - 2, 2, "\n\n") == 0);
    if (p.statements[i].is_comment_or_blank && after_blank) piece.erase(0, piece.find_first_not_of("\n"));
    text += piece;
  }
  return text;
}

void KitMaker::Write() {
  std::error_code ec;
  for (const auto& f : kept_) {
    const std::string dst = out_ + "/" + f;
    fs::create_directories(Dirname(dst), ec);
    auto pit = IsBuildFile(f) ? packages_.find(Dirname(f)) : packages_.end();
    if (pit != packages_.end()) {
      WriteWhole(dst, BuildText(pit->second));
    } else {
      fs::copy_file(root_ + "/" + f, dst, fs::copy_options::overwrite_existing, ec);
      if (ec) throw UserError("cannot copy " + f + " to " + dst + ": " + ec.message());
    }
    fs::permissions(dst, fs::status(root_ + "/" + f).permissions(), ec);
    report_.copied.push_back(f);
  }
  WriteWhole(out_ + "/README.md", kKitReadme);
}

// 1: no private folder or file; 2: no file equal to a private one (a solution copied under
// another name); 3: every label of a kept rule resolves.
void KitMaker::Check() const {
  std::error_code ec;
  std::vector<std::string> problems;
  std::map<uintmax_t, std::vector<std::string>> private_by_size;
  for (const auto& f : private_files_) private_by_size[fs::file_size(root_ + "/" + f, ec)].push_back(f);
  for (const auto& f : kept_) {
    if (IsPrivatePath(f)) problems.push_back(f + " is private but in the kit");
    auto it = private_by_size.find(fs::file_size(out_ + "/" + f, ec));
    if (it == private_by_size.end()) continue;
    const std::string data = ReadWhole(out_ + "/" + f);
    for (const auto& pf : it->second) {
      if (ReadWhole(root_ + "/" + pf) == data) problems.push_back(f + " has the same content as " + pf);
    }
  }
  std::set<std::string> defined;  // "pkg:name" of kept rules and kept files
  for (const auto& f : kept_) defined.insert(Key(Dirname(f), f.substr(f.rfind('/') + 1)));
  for (const auto& [pkg, p] : packages_) {
    for (size_t i = 0; i < p.statements.size(); ++i) {
      if (p.removed[i]) continue;
      for (const auto& n : DefinedNames(p.statements[i], /*with_reference=*/false)) defined.insert(Key(pkg, n));
      // A rule's outputs (genrule outs, ...) are strings of its package too.
      for (const auto& s : p.statements[i].strings) defined.insert(Key(pkg, s));
    }
  }
  for (const auto& [pkg, p] : packages_) {
    for (size_t i = 0; i < p.statements.size(); ++i) {
      if (p.removed[i]) continue;
      for (const auto& s : p.statements[i].strings) {
        Label l;
        if (!ParseLabel(s, pkg, &l) || l.bare) continue;
        if (packages_.count(l.package) == 0) {
          problems.push_back(p.build_path + ": " + s + " names a package the kit does not have");
        } else if (defined.count(Key(l.package, l.name)) == 0 && !fs::exists(out_ + "/" + Join(l.package, l.name))) {
          // A file of a subfolder (//pkg:dir/file) counts when the file is in the kit.
          problems.push_back(p.build_path + ": " + s + " names nothing the kit has");
        }
      }
    }
  }
  if (problems.empty()) return;
  std::string msg = "the kit in " + out_ + " fails its checks: " + problems[0];
  if (problems.size() > 1) msg += " (and " + std::to_string(problems.size() - 1) + " more)";
  throw UserError(msg);
}

void KitMaker::WarnAboutRemovedNames() {
  for (const auto& f : kept_) {
    if (IsBuildFile(f)) continue;
    const std::string data = ReadWhole(out_ + "/" + f);
    if (data.find('\0') != std::string::npos) continue;
    for (const auto& key : removed_keys_) {
      const std::string label = "//" + key;
      if (data.find(label) != std::string::npos) report_.warnings.push_back(f + " mentions " + label + ", which the kit does not have");
    }
  }
}

// Refuses a source that is not a checkout and an output folder that is not new and empty, or
// lies inside the source (the kit would end up in its own listing); creates the folder.
void CheckOptions(const KitOptions& options) {
  const std::string& checkout = options.source_root;
  if (checkout.empty() || !fs::is_directory(checkout)) throw UserError("--source: " + checkout + " is not a directory");
  if (!fs::exists(checkout + "/WORKSPACE")) throw UserError("--source: " + checkout + " has no WORKSPACE file");
  std::error_code ec;
  if (options.out_dir.empty()) throw UserError("--out: no output folder given");
  if (fs::exists(options.out_dir) && !fs::is_empty(options.out_dir, ec)) {
    throw UserError("--out: " + options.out_dir + " exists and is not empty");
  }
  std::string s = fs::weakly_canonical(checkout).string() + "/", d = fs::weakly_canonical(options.out_dir).string() + "/";
  if (d.rfind(s, 0) == 0) throw UserError("--out: " + options.out_dir + " is inside the source " + checkout);
  fs::create_directories(options.out_dir, ec);
  if (ec) throw UserError("--out: cannot create " + options.out_dir + ": " + ec.message());
}

}  // namespace

KitReport MakeStudentKit(const KitOptions& options) {
  CheckOptions(options);
  std::vector<std::string> notes;
  Source source;
  ReadSource(options.source_root, options.revision, &source, &notes);
  KitMaker kit(source.root, options.out_dir);
  kit.SortFiles(source.files);
  kit.ReadPackages();
  kit.RemoveRules();
  kit.DropUnusedSources();
  kit.Write();
  kit.Check();
  kit.WarnAboutRemovedNames();
  KitReport report = std::move(kit.report());
  for (const auto& n : notes) report.warnings.insert(report.warnings.begin(), n);
  return report;
}

}  // namespace distlm::tools
