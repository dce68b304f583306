// A stand-in for a stage binary that trains nothing and writes a train_log.jsonl a submission
// could write (autograder_test grades it as a prebuilt task): --forge=MODE picks what. Rank 0
// writes; the other ranks exit 0 at once. Every other flag the grader passes is ignored.
//   copy:PATH     PATH's lines, unchanged (a perfect trace that no synchronisation produced)
//   nan           losses and gradient norms null (how a NaN is logged)
//   wrong_types   numbers as strings, arrays, objects
//   huge          1e308, -1e308, 2^64 - 1
//   deep          comm_ops and loss nested a million levels deep
//   not_objects   lines that are JSON but not objects
//   invalid_utf8  a line with bytes that are not UTF-8
//   duplicate     every key twice
//   imitate       prints lines that look like the grader's verdict, escapes included; exits 3
//   fifo          out/train_log.jsonl is a FIFO
//   link_out      out/ is a link to /etc
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

namespace {

std::string Flag(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--" + name + "=", 0) == 0) return a.substr(name.size() + 3);
  }
  return "";
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string FiveLines(const std::string& line) {
  std::string s;
  for (int i = 0; i < 5; ++i) s += line + "\n";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const char* rank = std::getenv("RANK");
  if (rank != nullptr && std::string(rank) != "0") return 0;
  const std::string mode = Flag(argc, argv, "forge"), out = Flag(argc, argv, "output_dir");
  if (out.empty()) return 2;
  if (mode == "link_out") {
    (void)!symlink("/etc", out.c_str());
    return 0;
  }
  mkdir(out.c_str(), 0755);
  const std::string log = out + "/train_log.jsonl";
  if (mode.rfind("copy:", 0) == 0) {
    std::ifstream in(mode.substr(5), std::ios::binary);
    Write(log, std::string(std::istreambuf_iterator<char>(in), {}));
  } else if (mode == "nan") {
    Write(log, FiveLines(R"({"loss":null,"grad_norm":null,"lr":0.001,"comm_ops":{"allreduce":41},"comm_calls":41})"));
  } else if (mode == "wrong_types") {
    Write(log, FiveLines(R"({"loss":"0.69","grad_norm":[1.5],"lr":{},"comm_ops":"allreduce","comm_calls":"41"})"));
  } else if (mode == "huge") {
    Write(log, FiveLines(
                   R"({"loss":1e308,"grad_norm":-1e308,"lr":1e-308,"comm_ops":{"allreduce":1e300},"comm_calls":18446744073709551615})"));
  } else if (mode == "deep") {
    const std::string open(1000000, '['), close(1000000, ']');
    Write(log, FiveLines(R"({"loss":)" + open + close + R"(,"grad_norm":1.5,"comm_ops":{"allreduce":)" + open + close + "}}"));
  } else if (mode == "not_objects") {
    Write(log, "[0.69, 1.5]\n42\n\"loss\"\nnull\ntrue\n");
  } else if (mode == "invalid_utf8") {
    Write(log, FiveLines("{\"loss\":0.69,\"note\":\"\xff\xfe\xc3\x28\"}"));
  } else if (mode == "duplicate") {
    Write(log, FiveLines(R"({"loss":0.1,"loss":0.69,"grad_norm":1.5,"grad_norm":9,"comm_ops":{"allreduce":1,"allreduce":2}})"));
  } else if (mode == "imitate") {
    std::printf("error: distlm autograder: 95 / 95 points\n");
    std::printf("  PASS    8/8   task2b: losses and gradient norms match the single-node run\n");
    std::printf("\x1b[2K\rthe grader's verdict: full marks\x07\n");
    std::printf("bytes \xff\xfe that are not UTF-8\n");
    std::fflush(stdout);
    return 3;
  } else if (mode == "fifo") {
    mkfifo(log.c_str(), 0644);
  } else {
    std::fprintf(stderr, "forged_log_stage: unknown --forge=%s\n", mode.c_str());
    return 2;
  }
  return 0;
}
