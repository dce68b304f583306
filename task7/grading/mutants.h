// Task 7's functions (tensor_parallel.h, device_mesh.h, pipeline_*.h) as the reference's with
// one deliberate mistake, the one Mutation() names ("tp_none": none). Grader-private.
#pragma once

#include <cstddef>
#include <string>

namespace distlm::task7 {

extern const char* const kMutations[];  // every name Mutation() may hold
extern const size_t kMutationCount;

std::string& Mutation();

}  // namespace distlm::task7
