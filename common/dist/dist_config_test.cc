#include "common/dist/dist_config.h"

#include <cstdlib>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "absl/flags/flag.h"
#include "common/dist/dist_flags.h"
#include "common/dist/slurm_nodelist.h"
#include "common/runtime/errors.h"

namespace distlm::dist {
namespace {

using Env = std::map<std::string, std::string>;

DistFlagValues Flags() { return DistFlagValues(); }

// The UserError's message, or "" when resolution succeeded.
std::string ErrorOf(const DistFlagValues& flags, const Env& env) {
  try {
    ResolveDistConfig(flags, env);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(ResolveDistConfigTest, NothingGivenIsOneLocalRank) {
  DistConfig c = ResolveDistConfig(Flags(), {});
  EXPECT_EQ(c.backend, "gloo");
  EXPECT_EQ(c.master_ip, "127.0.0.1");
  EXPECT_EQ(c.master_port, 29500);
  EXPECT_EQ(c.world_size, 1);
  EXPECT_EQ(c.rank, 0);
  EXPECT_EQ(c.local_rank, 0);
  EXPECT_EQ(c.timeout_s, 300);
  EXPECT_EQ(c.source, "default");
}

TEST(ResolveDistConfigTest, HandoutCommandUsesLocalRankAsGlobalRank) {
  DistFlagValues f;
  f.master_ip = "10.10.1.1";
  f.master_port = 6585;
  f.world_size = 4;
  f.local_rank = 2;
  DistConfig c = ResolveDistConfig(f, {});
  EXPECT_EQ(c.master_ip, "10.10.1.1");
  EXPECT_EQ(c.master_port, 6585);
  EXPECT_EQ(c.world_size, 4);
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.local_rank, 2);
  EXPECT_EQ(c.source, "flags");
}

TEST(ResolveDistConfigTest, RankWinsOverLocalRank) {
  DistFlagValues f;
  f.world_size = 4;
  f.local_rank = 1;
  f.rank = 3;
  DistConfig c = ResolveDistConfig(f, {});
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.local_rank, 1);
}

TEST(ResolveDistConfigTest, TorchrunVariables) {
  DistConfig c = ResolveDistConfig(Flags(), {{"RANK", "1"},
                                             {"WORLD_SIZE", "4"},
                                             {"LOCAL_RANK", "1"},
                                             {"MASTER_ADDR", "10.0.0.2"},
                                             {"MASTER_PORT", "1234"}});
  EXPECT_EQ(c.source, "torchrun");
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.world_size, 4);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.master_ip, "10.0.0.2");
  EXPECT_EQ(c.master_port, 1234);
}

TEST(ResolveDistConfigTest, FlagsWinOverTheEnvironmentFieldByField) {
  DistFlagValues f;
  f.rank = 2;
  f.world_size = 3;
  f.master_ip = "1.2.3.4";
  f.master_port = 999;
  DistConfig c = ResolveDistConfig(f, {{"RANK", "1"},
                                       {"WORLD_SIZE", "4"},
                                       {"LOCAL_RANK", "1"},
                                       {"MASTER_ADDR", "10.0.0.2"},
                                       {"MASTER_PORT", "1234"}});
  EXPECT_EQ(c.source, "flags");
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.world_size, 3);
  EXPECT_EQ(c.local_rank, 1);  // not given as a flag: the launcher's
  EXPECT_EQ(c.master_ip, "1.2.3.4");
  EXPECT_EQ(c.master_port, 999);
}

TEST(ResolveDistConfigTest, OpenMpiVariables) {
  DistConfig c = ResolveDistConfig(Flags(), {{"OMPI_COMM_WORLD_RANK", "3"},
                                             {"OMPI_COMM_WORLD_SIZE", "4"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(c.source, "openmpi");
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.world_size, 4);
  EXPECT_EQ(c.local_rank, 1);
}

TEST(ResolveDistConfigTest, SlurmVariables) {
  DistConfig c = ResolveDistConfig(
      Flags(), {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}});
  EXPECT_EQ(c.source, "slurm");
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.world_size, 8);
  EXPECT_EQ(c.local_rank, 1);
}

TEST(ResolveDistConfigTest, SlurmGivesTheMasterFromTheNodeListAndJobId) {
  Env slurm = {{"SLURM_PROCID", "2"},
               {"SLURM_NTASKS", "4"},
               {"SLURM_JOB_NODELIST", "login1,node[03-06]"},
               {"SLURM_STEP_NODELIST", "node[03-06]"},
               {"SLURM_JOB_ID", "123456"}};
  DistConfig c = ResolveDistConfig(Flags(), slurm);
  EXPECT_EQ(c.master_ip, "node03") << "rank 0 runs on the step's first node";
  EXPECT_EQ(c.master_port, 10000 + 123456 % 20000);
  EXPECT_EQ(DescribeDistConfig(c),
            "4 ranks (slurm: SLURM_NTASKS=4), master node03 (SLURM_STEP_NODELIST) port 13456 (SLURM_JOB_ID)");
  slurm.erase("SLURM_STEP_NODELIST");
  EXPECT_EQ(ResolveDistConfig(Flags(), slurm).master_ip, "login1");
  // Flags and MASTER_ADDR/PORT still win; without Slurm's rank they are not read at all.
  DistFlagValues f = Flags();
  f.master_ip = "10.0.0.9";
  f.master_port = 4000;
  c = ResolveDistConfig(f, slurm);
  EXPECT_EQ(c.master_ip, "10.0.0.9");
  EXPECT_EQ(c.master_port, 4000);
  slurm["MASTER_ADDR"] = "head";
  slurm["MASTER_PORT"] = "4100";
  c = ResolveDistConfig(Flags(), slurm);
  EXPECT_EQ(c.master_ip, "head");
  EXPECT_EQ(c.master_port, 4100);
  c = ResolveDistConfig(Flags(), {{"SLURM_JOB_NODELIST", "node1"}, {"SLURM_JOB_ID", "7"}});
  EXPECT_EQ(c.master_ip, "127.0.0.1") << "an allocation without srun's ranks is one local rank";
  EXPECT_EQ(c.master_port, 29500);
  // A rank started by torchrun inside an allocation takes torchrun's master, not Slurm's.
  c = ResolveDistConfig(Flags(), {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"},
                                  {"SLURM_JOB_NODELIST", "node1"}, {"SLURM_JOB_ID", "7"}});
  EXPECT_EQ(c.master_ip, "127.0.0.1");
}

TEST(FirstSlurmHostTest, ExpandsTheFirstHostOnly) {
  EXPECT_EQ(FirstSlurmHost("node7", "V"), "node7");
  EXPECT_EQ(FirstSlurmHost("node[01-04,07],login2", "V"), "node01");
  EXPECT_EQ(FirstSlurmHost("node[7,3-4]", "V"), "node7");
  EXPECT_EQ(FirstSlurmHost("rack[1-2]-gpu[003-008]", "V"), "rack1-gpu003");
  EXPECT_EQ(FirstSlurmHost("a,b[1-2]", "V"), "a");
  EXPECT_EQ(FirstSlurmHost("localhost", "V"), "localhost");
  for (const char* bad : {"", ",node1", "node[1-4", "node[]", "node[-3]"}) {
    try {
      FirstSlurmHost(bad, "SLURM_JOB_NODELIST");
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("SLURM_JOB_NODELIST=\"" + std::string(bad) + "\""), std::string::npos)
          << e.what();
    }
  }
}

TEST(ResolveDistConfigTest, InnermostLauncherWins) {
  Env all = {{"RANK", "1"},         {"WORLD_SIZE", "2"},           {"OMPI_COMM_WORLD_RANK", "3"},
             {"OMPI_COMM_WORLD_SIZE", "4"}, {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}};
  DistConfig c = ResolveDistConfig(Flags(), all);
  EXPECT_EQ(c.source, "torchrun");
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.world_size, 2);
  all.erase("RANK");
  all.erase("WORLD_SIZE");
  c = ResolveDistConfig(Flags(), all);
  EXPECT_EQ(c.source, "openmpi");
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.world_size, 4);
}

TEST(ResolveDistConfigTest, LauncherRankWinsOverLocalRankFlag) {
  // torch.distributed.launch passes --local_rank and sets RANK to the global rank.
  DistFlagValues f;
  f.local_rank = 0;
  DistConfig c = ResolveDistConfig(f, {{"RANK", "5"}, {"WORLD_SIZE", "8"}});
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.local_rank, 0);
  EXPECT_EQ(c.source, "torchrun");
}

TEST(ResolveDistConfigTest, WorldSizeFlagCompletesALauncherRank) {
  DistFlagValues f;
  f.world_size = 8;
  DistConfig c = ResolveDistConfig(f, {{"SLURM_PROCID", "3"}});
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.world_size, 8);
}

TEST(ResolveDistConfigTest, EmptyVariablesCountAsUnset) {
  DistConfig c = ResolveDistConfig(Flags(), {{"RANK", ""}, {"MASTER_ADDR", ""}});
  EXPECT_EQ(c.source, "default");
  EXPECT_EQ(c.master_ip, "127.0.0.1");
}

TEST(ResolveDistConfigTest, BadFlagsAreNamed) {
  DistFlagValues f;
  f.backend = "tcp";
  EXPECT_EQ(ErrorOf(f, {}), "--backend=tcp is not a backend: use gloo, mpi or nccl");

  f = Flags();
  f.backend = "nccl";
  if (NcclAvailable()) {
    EXPECT_EQ(ErrorOf(f, {}), "");
  } else {
    EXPECT_EQ(ErrorOf(f, {}),
              "--backend=nccl needs a CUDA build of LibTorch; this one is CPU-only: use gloo or "
              "mpi");
  }

  f = Flags();
  f.rank = -2;
  EXPECT_EQ(ErrorOf(f, {}), "--rank=-2 is negative");
  f = Flags();
  f.local_rank = -5;
  EXPECT_EQ(ErrorOf(f, {}), "--local_rank=-5 is negative");
  f = Flags();
  f.world_size = -1;
  EXPECT_EQ(ErrorOf(f, {}),
            "--world_size=-1 is negative (0 = take it from the launcher's environment)");
  f = Flags();
  f.master_port = 70000;
  EXPECT_EQ(ErrorOf(f, {}), "--master_port=70000 is not a TCP port (1..65535; 0 = MASTER_PORT or 29500)");
  f = Flags();
  f.dist_timeout_s = 0;
  EXPECT_EQ(ErrorOf(f, {}), "--dist_timeout_s=0 must be a positive number of seconds");
}

TEST(ResolveDistConfigTest, RankMustBeBelowWorldSize) {
  DistFlagValues f;
  f.rank = 4;
  f.world_size = 4;
  EXPECT_EQ(ErrorOf(f, {}), "rank 4 (--rank=4) is not below the world size 4 (--world_size=4)");
  f = Flags();
  f.local_rank = 4;
  f.world_size = 4;
  EXPECT_EQ(ErrorOf(f, {}),
            "rank 4 (--local_rank=4, used as the global rank since --rank is absent) is not "
            "below the world size 4 (--world_size=4)");
  EXPECT_EQ(ErrorOf(Flags(), {{"RANK", "4"}, {"WORLD_SIZE", "4"}}),
            "rank 4 (RANK=4) is not below the world size 4 (WORLD_SIZE=4)");
  f = Flags();
  f.world_size = 2;
  EXPECT_EQ(ErrorOf(f, {{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}}),
            "rank 3 (OMPI_COMM_WORLD_RANK=3) is not below the world size 2 (--world_size=2)");
}

TEST(ResolveDistConfigTest, BadVariablesAreNamed) {
  EXPECT_EQ(ErrorOf(Flags(), {{"RANK", "abc"}, {"WORLD_SIZE", "2"}}),
            "environment variable RANK=\"abc\" (torchrun) is not an integer");
  EXPECT_EQ(ErrorOf(Flags(), {{"RANK", "0"}, {"WORLD_SIZE", "0"}}),
            "environment variable WORLD_SIZE=0 (torchrun) must be at least 1");
  EXPECT_EQ(ErrorOf(Flags(), {{"SLURM_PROCID", "-1"}, {"SLURM_NTASKS", "2"}}),
            "environment variable SLURM_PROCID=-1 (slurm) must be at least 0");
  EXPECT_EQ(ErrorOf(Flags(), {{"RANK", "1"}}),
            "RANK=1 (torchrun) is set but WORLD_SIZE is not: set it or pass --world_size");
  EXPECT_EQ(ErrorOf(Flags(), {{"MASTER_PORT", "99999"}}),
            "environment variable MASTER_PORT=99999 is not a TCP port (1..65535)");
  EXPECT_EQ(ErrorOf(Flags(), {{"MASTER_PORT", "http"}}),
            "environment variable MASTER_PORT=\"http\" (the master's port) is not an integer");
}

TEST(ResolveDistConfigTest, SeveralRanksNeedARank) {
  DistFlagValues f;
  f.world_size = 4;
  EXPECT_EQ(ErrorOf(f, {}),
            "--world_size=4 but no rank was given: pass --rank (or --local_rank), or start the "
            "ranks with torchrun, mpirun or srun");
}

TEST(DistFlagsTest, FlagsAndProcessEnvironment) {
  absl::SetFlag(&FLAGS_world_size, 3);
  absl::SetFlag(&FLAGS_master_port, 4321);
  absl::SetFlag(&FLAGS_backend, std::string("mpi"));
  setenv("RANK", "2", 1);
  setenv("LOCAL_RANK", "0", 1);
  unsetenv("WORLD_SIZE");
  DistConfig c = DistConfigFromFlagsAndEnv();
  EXPECT_EQ(c.backend, "mpi");
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.world_size, 3);
  EXPECT_EQ(c.master_port, 4321);
  EXPECT_EQ(c.source, "torchrun");
  unsetenv("RANK");
  unsetenv("LOCAL_RANK");
}

}  // namespace
}  // namespace distlm::dist
