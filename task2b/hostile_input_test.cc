// Hostile input, table-driven: bad flags and files, and distributed start-up failures. Each
// must end with one line "error: ..." naming what is wrong and a non-zero exit: never a crash,
// a hang, a backtrace or a silently wrong result.
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "common/runtime/atomic_file.h"
#include "common/testing/subprocess.h"

namespace {

using distlm::testing::Command;
using distlm::testing::ProcessResult;

std::string Part1() { return distlm::testing::Runfile("part1/reference"); }
std::string Task2b() { return distlm::testing::Runfile("task2b/reference"); }

const std::vector<std::string> kQuick = {"--max_steps=1", "--num_threads=1", "--max_seq_length=32",
                                         "--per_gpu_train_batch_size=4", "--do_eval=false"};

// The checks every case shares: non-zero exit, in time, exactly one "error:" line that contains
// `expect`, and none of the signs of a crash.
void ExpectOneLineError(const ProcessResult& r, const std::string& expect, const std::string& what) {
  EXPECT_FALSE(r.timed_out) << what << " hung:\n" << r.output;
  EXPECT_NE(r.exit_code, 0) << what << ":\n" << r.output;
  EXPECT_LT(r.exit_code, 128) << what << " died of a signal:\n" << r.output;
  int error_lines = 0;
  std::string error_line;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("error: ", 0) == 0) {
      ++error_lines;
      error_line = line;
    }
  }
  EXPECT_EQ(error_lines, 1) << what << ":\n" << r.output;
  std::printf("%-34s exit %d  %s\n", what.c_str(), r.exit_code, error_line.c_str());
  EXPECT_NE(error_line.find(expect), std::string::npos) << what << ": expected '" << expect << "' in:\n" << r.output;
  for (const char* crash : {"terminate called", "Segmentation", "Aborted", "Exception raised from"}) {
    EXPECT_EQ(r.output.find(crash), std::string::npos) << what << ":\n" << r.output;
  }
}

ProcessResult RunPart1(const std::vector<std::string>& extra) {
  Command c;
  c.argv = {Part1()};
  c.argv.insert(c.argv.end(), kQuick.begin(), kQuick.end());
  c.argv.insert(c.argv.end(), extra.begin(), extra.end());
  c.argv.push_back("--output_dir=" + distlm::testing::MakeTempDir("hostile_out"));
  return distlm::testing::Run(c, 60);
}

// A copy of the built-in RTE sample with train.tsv replaced.
std::string DataDirWithTrain(const std::string& train_tsv) {
  std::string dir = distlm::testing::MakeTempDir("hostile_data");
  distlm::WriteFileAtomically(dir + "/train.tsv", train_tsv);
  distlm::WriteFileAtomically(dir + "/dev.tsv", distlm::ReadFile(distlm::testing::Runfile("common/testdata/rte/dev.tsv")));
  return dir;
}

// A trained tiny model directory (config.json, model.safetensors, vocab.txt) to break.
const std::string& GoodModel() {
  static const std::string dir = [] {
    std::string out = distlm::testing::MakeTempDir("hostile_model") + "/model";
    Command c{{Part1(), "--max_steps=1", "--num_threads=1", "--max_seq_length=32", "--do_eval=false",
               "--output_dir=" + out},
              {}};
    auto r = distlm::testing::Run(c, 120);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return out;
  }();
  return dir;
}

std::string ModelWith(const std::string& file, const std::function<std::string(std::string)>& edit) {
  std::string dir = distlm::testing::MakeTempDir("hostile_bad_model");
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt"}) {
    std::string content = distlm::ReadFile(GoodModel() + "/" + f);
    distlm::WriteFileAtomically(dir + "/" + f, file == f ? edit(content) : content);
  }
  return dir;
}

std::string ReplaceFirst(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) s.replace(pos, from.size(), to);
  return s;
}

// A safetensors file whose two tensors claim overlapping bytes.
std::string OverlappingSafetensors(const std::string&) {
  std::string header =
      R"({"bert.pooler.dense.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("classifier.bias":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  while (header.size() % 8) header += ' ';
  std::string file(8, '\0');
  uint64_t n = header.size();
  std::memcpy(&file[0], &n, 8);
  return file + header + std::string(12, '\0');
}

TEST(HostileInputTest, FlagsAndFiles) {
  const std::string header = "index\tsentence1\tsentence2\tlabel\n";
  struct Case {
    std::string name;
    std::function<std::vector<std::string>()> flags;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"malformed TSV row", [&] { return std::vector<std::string>{"--data_dir=" + DataDirWithTrain(header + "0\tonly two columns\n")}; },
       "train.tsv:2"},
      {"empty data set", [&] { return std::vector<std::string>{"--data_dir=" + DataDirWithTrain(header)}; }, "empty"},
      {"unknown label", [&] { return std::vector<std::string>{"--data_dir=" + DataDirWithTrain(header + "0\tA man sings.\tA man sings.\tmaybe\n")}; },
       "maybe"},
      {"max_seq_length < 3", [] { return std::vector<std::string>{"--max_seq_length=2"}; }, "--max_seq_length must be >= 3"},
      {"batch size 0", [] { return std::vector<std::string>{"--per_gpu_train_batch_size=0"}; }, "--per_gpu_train_batch_size must be >= 1"},
      {"negative learning rate", [] { return std::vector<std::string>{"--learning_rate=-0.1"}; }, "--learning_rate must be > 0"},
      {"unknown task", [] { return std::vector<std::string>{"--task_name=qqq"}; }, "unknown task 'qqq'"},
      {"missing data dir", [] { return std::vector<std::string>{"--data_dir=/nonexistent"}; }, "--data_dir=/nonexistent"},
      {"vocabulary without [UNK]",
       [] { return std::vector<std::string>{"--model_name_or_path=" + ModelWith("vocab.txt", [](std::string v) { return ReplaceFirst(v, "[UNK]\n", "[UNKNOWN]\n"); })}; },
       "[UNK]"},
      {"config.json missing a field",
       [] { return std::vector<std::string>{"--model_name_or_path=" + ModelWith("config.json", [](std::string v) { return ReplaceFirst(v, "\"hidden_size\"", "\"hidden_sizes\""); })}; },
       "config.json: missing field \"hidden_size\""},
      {"config.json negative size",
       [] { return std::vector<std::string>{"--model_name_or_path=" + ModelWith("config.json", [](std::string v) { return ReplaceFirst(v, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": -2"); })}; },
       "\"num_hidden_layers\" must be > 0, got -2"},
      {"overlapping safetensors offsets",
       [] { return std::vector<std::string>{"--model_name_or_path=" + ModelWith("model.safetensors", OverlappingSafetensors)}; },
       "model.safetensors"},
      {"truncated safetensors",
       [] { return std::vector<std::string>{"--model_name_or_path=" + ModelWith("model.safetensors", [](std::string v) { return v.substr(0, v.size() / 3); })}; },
       "model.safetensors"},
      {"bad backend", [] { return std::vector<std::string>{"--backend=carrier_pigeon"}; }, "--backend=carrier_pigeon"},
      {"part1 with world size 4", [] { return std::vector<std::string>{"--world_size=4", "--rank=1", "--master_port=29999"}; },
       "part1 trains on one process"},
  };
  for (const auto& c : cases) {
    ExpectOneLineError(RunPart1(c.flags()), c.expect, c.name);
  }
  std::printf("%zu single-process bad-input cases checked\n", cases.size());
}

// Starts the given ranks of a task2b run (each its own process, as on a cluster) and returns
// their results.
std::vector<ProcessResult> RunRanks(const std::vector<std::vector<std::string>>& per_rank_flags, int port) {
  std::vector<Command> cmds;
  for (const auto& flags : per_rank_flags) {
    Command c;
    c.argv = {Task2b(), "--master_ip=127.0.0.1", "--master_port=" + std::to_string(port), "--dist_timeout_s=4"};
    c.argv.insert(c.argv.end(), kQuick.begin(), kQuick.end());
    c.argv.insert(c.argv.end(), flags.begin(), flags.end());
    c.argv.push_back("--output_dir=" + distlm::testing::MakeTempDir("hostile_rank"));
    c.env["LOCAL_WORLD_SIZE"] = "2";
    cmds.push_back(c);
  }
  return distlm::testing::RunAll(cmds, 90);
}

TEST(HostileInputTest, DistributedStartUp) {
  int cases = 0;
  // Unreachable master: rank 1 alone, nobody listens on the port.
  auto r = RunRanks({{"--world_size=2", "--local_rank=1"}}, distlm::testing::FreePort());
  ExpectOneLineError(r[0], "cannot reach the master at 127.0.0.1:", "unreachable master"), ++cases;

  // Port in use on rank 0.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  r = RunRanks({{"--world_size=2", "--local_rank=0"}}, ntohs(addr.sin_port));
  close(fd);
  ExpectOneLineError(r[0], "already in use", "port in use"), ++cases;

  // Rank >= world size.
  r = RunRanks({{"--world_size=2", "--rank=2"}}, distlm::testing::FreePort());
  ExpectOneLineError(r[0], "rank 2 (--rank=2) is not below the world size 2", "rank >= world size"), ++cases;

  // Ranks that disagree on the world size.
  r = RunRanks({{"--world_size=2", "--local_rank=0"}, {"--world_size=3", "--local_rank=1"}}, distlm::testing::FreePort());
  for (int i = 0; i < 2; ++i) ExpectOneLineError(r[i], "world size", "different world sizes, rank " + std::to_string(i));
  ++cases;

  // Ranks that disagree on the model: the built-in tiny model against a saved one with other
  // dropout settings in its config.
  std::string other = ModelWith("config.json", [](std::string v) {
    return ReplaceFirst(v, "\"hidden_dropout_prob\": 0.1", "\"hidden_dropout_prob\": 0.2");
  });
  r = RunRanks({{"--world_size=2", "--local_rank=0"}, {"--world_size=2", "--local_rank=1", "--model_name_or_path=" + other}},
               distlm::testing::FreePort());
  for (int i = 0; i < 2; ++i) ExpectOneLineError(r[i], "ranks disagree on model config", "different model configs, rank " + std::to_string(i));
  ++cases;

  // Ranks in different precisions (on a GPU machine, also a rank on the CPU beside one on cuda:
  // tools/gpu/check.sh runs that one).
  r = RunRanks({{"--world_size=2", "--local_rank=0", "--bf16"}, {"--world_size=2", "--local_rank=1"}},
               distlm::testing::FreePort());
  for (int i = 0; i < 2; ++i) {
    ExpectOneLineError(r[i], "ranks disagree on device and precision: rank 0 has cpu bf16, rank 1 has cpu fp32",
                       "different precisions, rank " + std::to_string(i));
  }
  ++cases;
  std::printf("%d distributed start-up cases checked\n", cases);
}

}  // namespace
