// The one place where LibTorch 1.13 and 2.x differ for process groups.
//
// In 1.13 a process group of one's own subclasses c10d::ProcessGroup, and callers call it
// directly. From 2.0 on, c10d::ProcessGroup is a front that dispatches each collective to a
// c10d::Backend registered for the tensors' device type (Gloo, NCCL, or one's own), so a
// group of one's own subclasses c10d::Backend and is reached through a ProcessGroup that
// holds it. distlm's own groups (MPI, counting, casting) and the library's (Gloo, NCCL)
// therefore derive from GroupImpl, and everything else holds a GroupPtr made by AsGroup:
//
//   GroupPtr pg = AsGroup(c10::make_intrusive<MpiProcessGroup>(...), "mpi");
//   pg->allreduce(tensors)->wait();                       // both lines
//   auto* mpi = ImplOf<MpiProcessGroup>(pg);              // the implementation behind it
#pragma once

#include <string>
#include <vector>

#include <c10/core/DeviceType.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define DISTLM_C10D_BACKEND 1
#endif

namespace distlm::dist {

#ifdef DISTLM_C10D_BACKEND
using GroupImpl = c10d::Backend;
#else
using GroupImpl = c10d::ProcessGroup;
#endif
using GroupPtr = c10::intrusive_ptr<c10d::ProcessGroup>;

// Gloo adds bfloat16 from LibTorch 2.x on (casting_process_group_test checks both ways).
constexpr bool kGlooHasBfloat16 = TORCH_VERSION_MAJOR >= 2;

// "1.13.1 (c10d::ProcessGroup)" or "2.11.0 (c10d::Backend)": for logs and tests.
std::string C10dLine();

// The group callers use for `impl`, whose getBackendName() is `backend_name` ("gloo", "nccl",
// "mpi", or a wrapped group's). On 2.x, tensors of each device type in `devices` reach
// `impl`; on 1.13 the group is `impl` itself and `devices` is not consulted.
GroupPtr AsGroup(c10::intrusive_ptr<GroupImpl> impl, const std::string& backend_name,
                 const std::vector<c10::DeviceType>& devices = {c10::DeviceType::CPU,
                                                                 c10::DeviceType::CUDA});

// On 2.x: tensors of `device` in `pg` go to `impl` from now on (an NCCL group's CPU
// tensors through Gloo, say). On 1.13 a group has one implementation: returns false.
bool AddDeviceImpl(const GroupPtr& pg, c10::DeviceType device, c10::intrusive_ptr<GroupImpl> impl,
                   const std::string& backend_name);

// The implementation of type T behind `pg` (its default one on 2.x), or nullptr.
GroupImpl* DefaultImpl(const GroupPtr& pg);
template <class T>
T* ImplOf(const GroupPtr& pg) {
  return dynamic_cast<T*>(DefaultImpl(pg));
}

}  // namespace distlm::dist
