// Reading the commands and cross-references out of the Markdown documents, so a test can hold
// them to the code: every `bazel run //...`, `bazel-bin/...` and `mpirun ... bazel-bin/...`
// line of a fenced code block names a target that exists and passes it only flags it defines;
// every "docs/handout/<file>.md, section '<name>'" a student stub cites is a heading there;
// every relative link points at a file (and heading) that is there.
//
// Only flag names are held to the code, plus the values absl can judge without running the
// command; placeholders such as R, DIR or $HOME stay placeholders.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace distlm::docs {

// One simple shell command: its words with quotes removed. `$VAR` and `$(...)` stay as text.
using Words = std::vector<std::string>;

// Splits one logical shell line (continuations already joined) into simple commands at
// unquoted ;, &&, ||, | and &. Redirections (>, >>, 2>, 2>&1, &>, <) are dropped with their
// targets; an unquoted # that starts a word starts a comment.
std::vector<Words> SplitShellLine(const std::string& line);

// A command the documents ask the reader to type, and what it runs.
struct DocCommand {
  enum class Kind {
    kRun,    // `bazel run //pkg:name -- ARGS` or `bazel-bin/pkg/name ARGS` (also under mpirun)
    kBuild,  // `bazel build` or `bazel test`: only the labels are checked
  };
  std::string file;
  int line = 0;      // 1-based, where the command starts
  std::string text;  // as written, continuations joined
  Kind kind = Kind::kRun;
  std::string label;                // kRun: the target, as //pkg:name
  Words args;                       // kRun: what the binary is given
  std::vector<std::string> labels;  // kBuild: the targets named (patterns like //... left out)
};

// The commands in the fenced code blocks of a Markdown text (`file` names it in messages).
// Recognised: bazel run/build/test; a program bazel-bin/...; mpirun, mpiexec or srun running
// bazel-bin/...; each after optional VAR=value assignments and sudo, env, time, nohup or
// timeout N. Other lines (cd, git, grep, ...) are not commands of this project.
std::vector<DocCommand> ExtractCommands(const std::string& markdown, const std::string& file);

// "//a/b" -> "//a/b:b"; "//a:b" unchanged; "" for what is not a label.
std::string NormaliseLabel(const std::string& label);

// "bazel-bin/a/b/c" (or "./bazel-bin/...") -> "//a/b:c"; "" for anything else.
std::string LabelOfBazelBinPath(const std::string& path);

// True for a value the reader replaces: it holds a $ or <...>, is "...", or is an upper-case
// name such as R, N, DIR or RESULTS_FILE.
bool IsPlaceholder(const std::string& value);

// Everything before the first standalone "--", and what follows it (the command a launcher
// runs), if there is one.
struct ArgSplit {
  Words own;
  std::optional<Words> nested;
};
ArgSplit SplitAtDoubleDash(const Words& args);

// What absl's --helpfull lists: flag name -> whether it is a boolean (default true or false).
std::map<std::string, bool> ParseAbslHelp(const std::string& helpfull_output);

// One line per problem with args given to an absl binary that defines `flags` (name -> is
// boolean): an undefined flag, --noX for a non-boolean X, a non-boolean flag without =value,
// a word that is not a flag. Flags starting with one of `foreign_prefixes` belong to another
// parser inside the binary (Google Benchmark's --benchmark_*) and are left to the caller.
std::vector<std::string> CheckAbslArgs(const Words& args, const std::map<std::string, bool>& flags,
                                       const std::vector<std::string>& foreign_prefixes = {});

// The same for a shell script that has no flag library, against its --help text: every --flag
// and every word that is not a number or placeholder must appear in it.
std::vector<std::string> CheckScriptArgs(const Words& args, const std::string& usage);

// The ATX headings (# ...) outside code blocks, without the #s and surrounding spaces.
std::vector<std::string> Headings(const std::string& markdown);

// GitHub's anchor for a heading: lower case, punctuation other than - and _ dropped, spaces
// turned into -.
std::string GithubAnchor(const std::string& heading);

// A relative Markdown link [text](target) outside code blocks.
struct Link {
  int line = 0;
  std::string path;    // "" for a link within the same file
  std::string anchor;  // without '#'; "" when there is none
};
std::vector<Link> RelativeLinks(const std::string& markdown);

// What a student stub cites: "docs/handout/part1.md, section 'The backward pass'".
struct SectionReference {
  std::string file;     // "docs/handout/part1.md"
  std::string section;  // "The backward pass"
};
std::vector<SectionReference> FindSectionReferences(const std::string& source);

}  // namespace distlm::docs
