// Holds the documents to the code: every command a reader is asked to type names a target
// that exists and gives it only flags it defines (absl's --helpfull, or a script's --help);
// every section a student stub cites exists; every relative link resolves; and, where a
// document shows what a command prints, the program prints that. (The reading of Markdown and
// shell lines these checks rest on is tested on small inputs in handout_parse_test.cc.)
//
// What to check comes from docs/BUILD as arguments (one binary per target, paths from Bazel):
//   --doc=PATH                a Markdown file whose commands and links are checked
//   --target=LABEL=PATH       a target the documents may name, and its runfile
//   --stubs=PATH              the student stubs, concatenated (see :student_stubs in docs/BUILD),
//                             which cite "docs/handout/X.md, section 'Y'"
//   --file=PATH               a file the documents may link to
//   --output_doc=PATH         a Markdown file searched only for shown output to check
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/runtime/atomic_file.h"
#include "common/testing/subprocess.h"
#include "docs/handout_commands.h"

namespace distlm::docs {
namespace {

struct Inputs {
  std::vector<std::string> docs;
  std::map<std::string, std::string> targets;  // normalised label -> runfile path
  std::string stubs;
  std::set<std::string> files;  // docs and other files links may point at
  std::vector<std::string> output_docs;
};

Inputs& TheInputs() {
  static Inputs inputs;
  return inputs;
}

// "a/b/../c/./d" -> "a/c/d".
std::string NormalisePath(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream in(path);
  std::string part;
  while (std::getline(in, part, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == ".." && !parts.empty() && parts.back() != "..") {
      parts.pop_back();
    } else {
      parts.push_back(part);
    }
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

bool IsScript(const std::string& path) {
  std::string head = ReadFile(path).substr(0, 2);
  return head == "#!";
}

// Flags that a binary hands to a second parser, and how to check them: run the binary with
// these arguments plus the flags, which must exit 0 without doing real work.
struct ForeignFlags {
  std::string prefix;
  std::vector<std::string> probe_args;
};
const std::map<std::string, ForeignFlags>& Foreign() {
  // The collectives benchmark gives --benchmark_* to Google Benchmark; one rank, one small
  // size and --benchmark_list_tests make it list its benchmarks and stop (no network).
  static const std::map<std::string, ForeignFlags> kForeign = {
      {"//task4_bench:collectives",
       {"--benchmark_", {"--min_bytes=4096", "--max_bytes=4096", "--num_threads=1", "--benchmark_list_tests=true"}}},
  };
  return kForeign;
}

// What each binary says about its flags, asked once.
class HelpCache {
 public:
  const std::string& Text(const std::string& path, bool script) {
    auto it = text_.find(path);
    if (it != text_.end()) return it->second;
    testing::ProcessResult r = testing::Run({{path, script ? "--help" : "--helpfull"}, {}}, 60);
    return text_[path] = r.output;
  }

 private:
  std::map<std::string, std::string> text_;
};

// Checks one command; returns its problems, each one line.
std::vector<std::string> CheckCommand(const std::string& label, const Words& args, HelpCache& help) {
  const Inputs& in = TheInputs();
  std::vector<std::string> problems;
  auto target = in.targets.find(label);
  if (target == in.targets.end()) {
    problems.push_back(label + " is not a target this test knows: fix the label, or add it to the test's data and "
                       "--target arguments in docs/BUILD");
    return problems;
  }
  const std::string& path = target->second;
  const ArgSplit split = SplitAtDoubleDash(args);
  if (IsScript(path)) {
    const std::string& usage = help.Text(path, /*script=*/true);
    if (usage.empty() || usage.find("unknown") != std::string::npos) {
      problems.push_back(label + " --help printed no help: " + usage.substr(0, 200));
    }
    for (const auto& p : CheckScriptArgs(split.own, usage)) problems.push_back(label + ": " + p);
  } else {
    const std::string& text = help.Text(path, /*script=*/false);
    const std::map<std::string, bool> flags = ParseAbslHelp(text);
    if (flags.empty()) {
      problems.push_back(label + " --helpfull listed no flags: " + text.substr(0, 200));
      return problems;
    }
    auto foreign = Foreign().find(label);
    std::vector<std::string> prefixes;
    if (foreign != Foreign().end()) prefixes.push_back(foreign->second.prefix);
    for (const auto& p : CheckAbslArgs(split.own, flags, prefixes)) problems.push_back(label + ": " + p);
    // The values absl can judge: everything but placeholders, parsed for real (absl reports
    // "ERROR: ..." for an unknown flag or a bad value, then --helpfull stops the program).
    std::vector<std::string> argv = {path};
    Words foreign_args;
    for (const auto& a : split.own) {
      const size_t eq = a.find('=');
      if (!prefixes.empty() && a.rfind(prefixes[0], 0) == 0) {
        foreign_args.push_back(eq != std::string::npos && IsPlaceholder(a.substr(eq + 1))
                                   ? a.substr(0, eq + 1) + testing::MakeTempDir("placeholder") + "/value"
                                   : a);
        continue;
      }
      // Flags already reported above as undefined would only be reported again.
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      const bool defined = flags.count(name) != 0 || (name.rfind("no", 0) == 0 && flags.count(name.substr(2)) != 0);
      if (a.rfind("--", 0) == 0 && defined && (eq == std::string::npos || !IsPlaceholder(a.substr(eq + 1)))) {
        argv.push_back(a);
      }
    }
    argv.push_back("--helpfull");
    testing::ProcessResult parsed = testing::Run({argv, {}}, 60);
    std::stringstream lines(parsed.output);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("ERROR:", 0) == 0) problems.push_back(label + ": " + line);
    }
    if (!foreign_args.empty()) {
      std::vector<std::string> probe = {path};
      probe.insert(probe.end(), foreign->second.probe_args.begin(), foreign->second.probe_args.end());
      probe.insert(probe.end(), foreign_args.begin(), foreign_args.end());
      testing::ProcessResult r = testing::Run({probe, {}}, 60);
      if (r.exit_code != 0) {
        problems.push_back(label + ": its " + foreign->second.prefix + "* flags were refused (exit " +
                           std::to_string(r.exit_code) + "): " + r.output.substr(0, 300));
      }
    }
  }
  if (split.nested) {
    // A launcher's command: check it too when it is one of ours.
    if (split.nested->empty()) {
      problems.push_back(label + ": nothing after '--'");
    } else if (const std::string inner = LabelOfBazelBinPath((*split.nested)[0]); !inner.empty()) {
      for (const auto& p : CheckCommand(inner, Words(split.nested->begin() + 1, split.nested->end()), help)) {
        problems.push_back(p);
      }
    }
  }
  return problems;
}

std::string Where(const DocCommand& c) { return c.file + ":" + std::to_string(c.line) + ": `" + c.text + "`"; }

// ---- the documents themselves --------------------------------------------------------------

TEST(DocumentsTest, EveryCommandNamesATargetAndFlagsItDefines) {
  const Inputs& in = TheInputs();
  ASSERT_FALSE(in.docs.empty()) << "no --doc arguments: see docs/BUILD";
  HelpCache help;
  int checked = 0;
  for (const std::string& doc : in.docs) {
    const auto commands = ExtractCommands(ReadFile(doc), doc);
    int in_doc = 0;
    for (const DocCommand& c : commands) {
      std::vector<std::string> problems;
      if (c.kind == DocCommand::Kind::kBuild) {
        for (const auto& l : c.labels) {
          if (in.targets.count(l) == 0) {
            problems.push_back(l + " is not a target this test knows: fix the label, or add it to docs/BUILD");
          }
        }
      } else {
        problems = CheckCommand(c.label, c.args, help);
      }
      for (const auto& p : problems) ADD_FAILURE() << Where(c) << "\n  " << p;
      ++in_doc;
    }
    std::printf("%s: %d command(s) checked\n", doc.c_str(), in_doc);
    checked += in_doc;
  }
  EXPECT_GT(checked, 0) << "no commands found: is the extraction broken?";
}

// The check must be able to fail: a command with a misspelt flag, a flag given without its
// value and a value absl cannot parse, against a real binary.
TEST(DocumentsTest, AWrongCommandIsCaught) {
  const Inputs& in = TheInputs();
  ASSERT_TRUE(in.targets.count("//tools:launch")) << "docs/BUILD must give //tools:launch";
  HelpCache help;
  auto cmds = ExtractCommands(
      "```\nbazel run //tools:launch -- --nproc_per_node=four --nproc_per_nod=2 --tee -- bazel-bin/no/such x\n```\n",
      "synthetic.md");
  ASSERT_EQ(cmds.size(), 1u);
  auto problems = CheckCommand(cmds[0].label, cmds[0].args, help);
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  EXPECT_NE(all.find("--nproc_per_nod is not a flag"), std::string::npos) << all;
  EXPECT_NE(all.find("--tee takes a value"), std::string::npos) << all;
  EXPECT_NE(all.find("Illegal value 'four'"), std::string::npos) << all;
  EXPECT_NE(all.find("//no:such is not a target"), std::string::npos) << all;
}

// The bundle docs/BUILD makes: "==> path <==" before each stub's text.
std::map<std::string, std::string> ReadStubs(const std::string& bundle) {
  std::map<std::string, std::string> stubs;
  std::stringstream in(ReadFile(bundle));
  std::string current;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("==> ", 0) == 0 && line.size() > 8 && line.compare(line.size() - 4, 4, " <==") == 0) {
      current = line.substr(4, line.size() - 8);
      stubs[current];
    } else if (!current.empty()) {
      stubs[current] += line + "\n";
    }
  }
  return stubs;
}

TEST(DocumentsTest, EverySectionTheStubsCiteExists) {
  const Inputs& in = TheInputs();
  if (in.stubs.empty()) GTEST_SKIP() << "no --stubs argument for this set of documents";
  const auto stubs = ReadStubs(in.stubs);
  ASSERT_FALSE(stubs.empty()) << in.stubs << " holds no stub";
  int references = 0;
  for (const auto& [stub, text] : stubs) {
    for (const SectionReference& ref : FindSectionReferences(text)) {
      ++references;
      if (in.files.count(ref.file) == 0) {
        ADD_FAILURE() << stub << " cites " << ref.file << ", which is not among this test's documents";
        continue;
      }
      auto headings = Headings(ReadFile(ref.file));
      EXPECT_NE(std::find(headings.begin(), headings.end(), ref.section), headings.end())
          << stub << " cites section '" << ref.section << "' of " << ref.file << ", which has no such heading";
    }
  }
  EXPECT_GT(references, 0) << "the stubs cite no handout section: is the pattern out of date?";
}

TEST(DocumentsTest, RelativeLinksResolve) {
  const Inputs& in = TheInputs();
  for (const std::string& doc : in.docs) {
    for (const Link& l : RelativeLinks(ReadFile(doc))) {
      const std::string target = l.path.empty() ? doc : NormalisePath(Dirname(doc) + "/" + l.path);
      const std::string where = doc + ":" + std::to_string(l.line) + ": link to " + l.path +
                                (l.anchor.empty() ? "" : "#" + l.anchor);
      if (in.files.count(target) == 0 && in.files.count(NormalisePath(target + "/README.md")) == 0) {
        ADD_FAILURE() << where << ": " << target << " is not a file this test knows (add it to docs/BUILD)";
        continue;
      }
      if (l.anchor.empty()) continue;
      if (target.size() < 3 || target.compare(target.size() - 3, 3, ".md") != 0) continue;
      bool found = false;
      for (const auto& h : Headings(ReadFile(target))) found = found || GithubAnchor(h) == l.anchor;
      EXPECT_TRUE(found) << where << ": " << target << " has no heading with that anchor";
    }
  }
}

// A document shows what a command prints: a fenced block right after a comment starting
//   <!-- checked output
// holds lines that the reference solution (//pkg:reference for the command's //pkg:student)
// must print, in order, when given the arguments of the last command before the comment
// (--output_dir replaced by a fresh folder). Numbers must agree to 1e-5 relative (another CPU
// may round the last digit differently). The handout names no reference target itself: the
// student kit has none.
TEST(DocumentsTest, ShownOutputIsWhatTheProgramPrints) {
  const Inputs& in = TheInputs();
  const std::string marker = "<!-- checked output";
  int blocks = 0, skipped = 0;
  std::vector<std::string> docs = in.docs;
  docs.insert(docs.end(), in.output_docs.begin(), in.output_docs.end());
  for (const std::string& doc : docs) {
    const std::string text = ReadFile(doc);
    std::vector<std::string> lines;
    {
      std::stringstream ss(text);
      for (std::string l; std::getline(ss, l);) lines.push_back(l);
    }
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].rfind(marker, 0) != 0) continue;
      // The command: the last one before the marker.
      std::string before;
      for (size_t j = 0; j < i; ++j) before += lines[j] + "\n";
      auto cmds = ExtractCommands(before, doc);
      ASSERT_FALSE(cmds.empty()) << doc << ":" << i + 1 << ": no command before the checked output";
      const std::string student = cmds.back().label;
      const std::string suffix = ":student";
      ASSERT_TRUE(student.size() > suffix.size() &&
                  student.compare(student.size() - suffix.size(), suffix.size(), suffix) == 0)
          << doc << ":" << i + 1 << ": the command before the checked output runs " << student
          << ", not a stage's :student binary";
      const std::string label = student.substr(0, student.size() - suffix.size()) + ":reference";
      // The expected lines: the next fenced block.
      size_t start = i + 1;
      while (start < lines.size() && lines[start].rfind("```", 0) != 0) ++start;
      std::vector<std::string> expected;
      for (size_t k = start + 1; k < lines.size() && lines[k].rfind("```", 0) != 0; ++k) expected.push_back(lines[k]);
      ASSERT_FALSE(expected.empty()) << doc << ":" << i + 1 << ": no output block after the marker";
      auto target = in.targets.find(label);
      if (target == in.targets.end()) {
        ++skipped;
        std::printf("SKIPPED: %s:%zu shows the output of %s, which this test does not have (the student kit has no "
                    "reference binaries; the guide test of docs/BUILD checks it)\n",
                    doc.c_str(), i + 1, label.c_str());
        continue;
      }
      ++blocks;
      std::vector<std::string> argv = {target->second};
      const std::string out_dir = testing::MakeTempDir("checked_output");
      for (const auto& a : cmds.back().args) {
        if (a.rfind("--output_dir=", 0) == 0) {
          argv.push_back("--output_dir=" + out_dir + "/out");
        } else {
          argv.push_back(a);
        }
      }
      testing::ProcessResult r = testing::Run({argv, {}}, 120);
      ASSERT_EQ(r.exit_code, 0) << doc << ":" << i + 1 << ": " << label << " failed:\n" << r.output;
      std::vector<std::string> got;
      std::stringstream ss(r.output);
      for (std::string l; std::getline(ss, l);) got.push_back(l);
      auto same = [](const std::string& want, const std::string& have) {
        std::stringstream a(want), b(have);
        std::string x, y;
        while (a >> x) {
          if (!(b >> y)) return false;
          char* ex = nullptr;
          char* ey = nullptr;
          const double dx = std::strtod(x.c_str(), &ex), dy = std::strtod(y.c_str(), &ey);
          if (*ex == '\0' && *ey == '\0' && !x.empty() && !y.empty()) {
            if (std::abs(dx - dy) > 1e-5 * std::max(std::abs(dx), 1e-12)) return false;
          } else if (x != y) {
            return false;
          }
        }
        return !(b >> y);
      };
      size_t pos = 0;
      for (const auto& want : expected) {
        while (pos < got.size() && !same(want, got[pos])) ++pos;
        EXPECT_LT(pos, got.size()) << doc << ": the shown line '" << want << "' is not in what " << label
                                   << " printed (in order):\n"
                                   << r.output;
        if (pos < got.size()) ++pos;
      }
    }
  }
  if (blocks == 0 && skipped == 0) std::printf("no checked output blocks in these documents\n");
}

}  // namespace
}  // namespace distlm::docs

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto& in = distlm::docs::TheInputs();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const std::string& flag) { return a.substr(flag.size()); };
    if (a.rfind("--doc=", 0) == 0) {
      in.docs.push_back(value("--doc="));
      in.files.insert(value("--doc="));
    } else if (a.rfind("--target=", 0) == 0) {
      const std::string v = value("--target=");
      const size_t eq = v.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "error: --target=%s is not LABEL=PATH\n", v.c_str());
        return 2;
      }
      in.targets[distlm::docs::NormaliseLabel(v.substr(0, eq))] = v.substr(eq + 1);
    } else if (a.rfind("--stubs=", 0) == 0) {
      in.stubs = value("--stubs=");
    } else if (a.rfind("--file=", 0) == 0) {
      in.files.insert(value("--file="));
    } else if (a.rfind("--output_doc=", 0) == 0) {
      in.output_docs.push_back(value("--output_doc="));
    } else {
      std::fprintf(stderr, "error: unexpected argument '%s' (see the top of docs/handout_commands_test.cc)\n",
                   a.c_str());
      return 2;
    }
  }
  return RUN_ALL_TESTS();
}
