// How a mistakes test runs a stage's local test on a mutant: the mutant's functions are linked
// in place of the student's, and which mistake they make is read, in every rank, from an
// environment variable the test sets before it starts the ranks.
#pragma once

#include <cstdlib>
#include <string>

#include "common/testing/rank_test.h"
#include "grading/mistake_line.h"

namespace distlm::grading {

// What a mistakes test runs: the part and the local test named in the instructor guide's
// table, and the variable its ranks read the mutation from.
struct LocalTest {
  const char* var;
  std::string part;
  std::string test;
};

// Sets `mutation` (a ranks' process reads it at start: see ReadMutation) from the environment.
inline bool ReadMutation(const char* var, std::string& mutation) {
  if (const char* m = std::getenv(var)) mutation = m;
  return true;
}

// Runs the local test's `rank_case` on `world` ranks with `mutation`, prints its table line
// under `name`, and returns what the test said ("" when it passed).
inline std::string RunLocalTest(const LocalTest& t, const std::string& mutation, const std::string& name,
                                const std::string& rank_case, int world = 2) {
  setenv(t.var, mutation.c_str(), 1);
  std::string message = testing::RunRanks(rank_case, world);
  unsetenv(t.var);
  PrintMistake(t.part, name, t.test + (rank_case.empty() ? "" : " (" + rank_case + ")"), message);
  return message;
}

}  // namespace distlm::grading
