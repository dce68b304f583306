// The Markdown and shell reading of docs/handout_commands.h on small inputs: shell lines, the
// commands of code blocks, absl's --helpfull, flag checks, placeholders, headings, anchors,
// links and stub citations. The documents themselves are handout_commands_test.cc's.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "docs/handout_commands.h"

namespace distlm::docs {
namespace {

TEST(SplitShellLineTest, QuotesEnvironmentOperatorsAndRedirections) {
  auto c = SplitShellLine("A=1 bazel run //x:y -- --m=\"a b\" --n='c d' 2>&1 | tee log # note");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0], (Words{"A=1", "bazel", "run", "//x:y", "--", "--m=a b", "--n=c d"}));
  EXPECT_EQ(c[1], (Words{"tee", "log"}));
  c = SplitShellLine("bazel build //a && bazel-bin/a/a --x=$HOME/out > out.txt; echo done &");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[1], (Words{"bazel-bin/a/a", "--x=$HOME/out"}));
  EXPECT_EQ(c[2], (Words{"echo", "done"}));
  c = SplitShellLine("x --ip=$(hostname -I | cut -d' ' -f1) &>/dev/null");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0], (Words{"x", "--ip=$(hostname -I | cut -d' ' -f1)"}));
  EXPECT_TRUE(SplitShellLine("# only a comment").empty());
}

TEST(ExtractCommandsTest, FindsTheCommandsOfCodeBlocksOnly) {
  const std::string md =
      "Prose: bazel run //not:this -- --x=1\n"
      "```sh\n"
      "bazel build //a:b //c/... //d\n"
      "sudo OMPI_X=1 bazel run //tools:launch -- --nproc_per_node=4 \\\n"
      "    -- bazel-bin/task2b/student --local_rank=R\n"
      "mpirun -np 4 --host a,b bazel-bin/task2b/student --backend=mpi\n"
      "cat bazel-bin/x/y  # a file, not a program\n"
      "```\n"
      "~~~\n"
      "timeout 60 ./bazel-bin/t/u --flag\n"
      "~~~\n";
  auto cmds = ExtractCommands(md, "doc.md");
  ASSERT_EQ(cmds.size(), 4u);
  EXPECT_EQ(cmds[0].kind, DocCommand::Kind::kBuild);
  EXPECT_EQ(cmds[0].labels, (std::vector<std::string>{"//a:b", "//d:d"}));
  EXPECT_EQ(cmds[1].label, "//tools:launch");
  EXPECT_EQ(cmds[1].line, 4);
  EXPECT_EQ(cmds[1].args, (Words{"--nproc_per_node=4", "--", "bazel-bin/task2b/student", "--local_rank=R"}));
  EXPECT_EQ(cmds[2].label, "//task2b:student");
  EXPECT_EQ(cmds[2].args, (Words{"--backend=mpi"}));
  EXPECT_EQ(cmds[3].label, "//t:u");
  EXPECT_EQ(cmds[3].args, (Words{"--flag"}));
}

TEST(ParseAbslHelpTest, NamesAndBooleans) {
  const std::string help =
      "prog: usage\n\n  Flags from a.cc:\n"
      "    --do_eval (evaluate on the dev split after every epoch); default: true;\n"
      "    --learning_rate (peak learning rate of AdamW); default: 5e-05;\n"
      "    --master_ip (address of rank 0, which hosts the rendezvous store; empty =\n"
      "      MASTER_ADDR, else 127.0.0.1); default: \"\";\n";
  auto flags = ParseAbslHelp(help);
  ASSERT_EQ(flags.size(), 3u);
  EXPECT_TRUE(flags.at("do_eval"));
  EXPECT_FALSE(flags.at("learning_rate"));
  EXPECT_FALSE(flags.at("master_ip"));
}

TEST(CheckAbslArgsTest, EveryKindOfMistake) {
  const std::map<std::string, bool> flags = {{"do_eval", true}, {"world_size", false}};
  EXPECT_TRUE(CheckAbslArgs({"--do_eval", "--nodo_eval", "--do_eval=false", "--world_size=R"}, flags).empty());
  auto p = CheckAbslArgs({"--epochs=3", "--noworld_size", "--world_size", "extra", "--benchmark_x=1"}, flags);
  ASSERT_EQ(p.size(), 5u);
  EXPECT_NE(p[0].find("--epochs is not a flag"), std::string::npos);
  EXPECT_NE(p[1].find("not a boolean"), std::string::npos);
  EXPECT_NE(p[2].find("takes a value"), std::string::npos);
  EXPECT_NE(p[3].find("'extra' is not a flag"), std::string::npos);
  EXPECT_EQ(CheckAbslArgs({"--benchmark_x=1"}, flags, {"--benchmark_"}).size(), 0u);
}

TEST(CheckScriptArgsTest, FlagsAndWordsMustBeInTheUsage) {
  const std::string usage = "usage: tool up N [--rate=RATE]\n       tool down\n";
  EXPECT_TRUE(CheckScriptArgs({"up", "4", "--rate=1gbit"}, usage).empty());
  EXPECT_EQ(CheckScriptArgs({"upp", "--rat=1", "--delay=1ms"}, usage).size(), 3u);
}

TEST(PlaceholderTest, WhatCountsAsOne) {
  for (const char* v : {"R", "DIR", "RESULTS_FILE", "$HOME/x", "<ip>", "..."}) EXPECT_TRUE(IsPlaceholder(v)) << v;
  for (const char* v : {"gloo", "10.10.1.1", "4", "Rte", "/tmp/x"}) EXPECT_FALSE(IsPlaceholder(v)) << v;
}

TEST(MarkdownTest, HeadingsAnchorsLinksAndStubReferences) {
  const std::string md =
      "# Part 2: gradients\n```\n# not a heading [x](nope.md)\n```\n## Task 2a  \n"
      "See [2b](part2.md#task-2b), [here](#task-2a), `[code](no.md)` and [web](https://x.org/a.md).\n";
  EXPECT_EQ(Headings(md), (std::vector<std::string>{"Part 2: gradients", "Task 2a"}));
  EXPECT_EQ(GithubAnchor("Part 2: gradients"), "part-2-gradients");
  EXPECT_EQ(GithubAnchor("What `--local_rank` means (and R)"), "what---local_rank-means-and-r");
  auto links = RelativeLinks(md);
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[0].path, "part2.md");
  EXPECT_EQ(links[0].anchor, "task-2b");
  EXPECT_EQ(links[1].path, "");
  EXPECT_EQ(links[1].line, 6);
  auto refs = FindSectionReferences("StudentTodo(\"x\", \"docs/handout/part1.md, section 'The backward pass'\");");
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_EQ(refs[0].file, "docs/handout/part1.md");
  EXPECT_EQ(refs[0].section, "The backward pass");
  EXPECT_EQ(NormaliseLabel("//tools/download"), "//tools/download:download");
  EXPECT_EQ(LabelOfBazelBinPath("./bazel-bin/task4_bench/cluster/emulated_cluster"),
            "//task4_bench/cluster:emulated_cluster");
}

}  // namespace
}  // namespace distlm::docs
