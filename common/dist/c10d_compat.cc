#include "common/dist/c10d_compat.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/version.h>

namespace distlm::dist {

std::string C10dLine() {
#ifdef DISTLM_C10D_BACKEND
  return std::string(TORCH_VERSION) + " (c10d::Backend)";
#else
  return std::string(TORCH_VERSION) + " (c10d::ProcessGroup)";
#endif
}

#ifdef DISTLM_C10D_BACKEND

GroupPtr AsGroup(c10::intrusive_ptr<GroupImpl> impl, const std::string& backend_name,
                 const std::vector<c10::DeviceType>& devices) {
  // The store is only consulted by ProcessGroup::splitGroup, which distlm never calls.
  auto pg = c10::make_intrusive<c10d::ProcessGroup>(c10::make_intrusive<c10d::HashStore>(),
                                                    impl->getRank(), impl->getSize());
  const auto type = c10d::ProcessGroup::strToBackendType(backend_name);
  for (c10::DeviceType device : devices) pg->setBackend(device, type, impl);
  // The default backend names the group (getBackendName) and is what DefaultImpl returns.
  pg->setDefaultBackend(type);
  return pg;
}

bool AddDeviceImpl(const GroupPtr& pg, c10::DeviceType device, c10::intrusive_ptr<GroupImpl> impl,
                   const std::string& backend_name) {
  pg->setBackend(device, c10d::ProcessGroup::strToBackendType(backend_name), impl);
  return true;
}

GroupImpl* DefaultImpl(const GroupPtr& pg) {
  if (!pg || !pg->hasBackends()) return nullptr;
  return pg->getDefaultBackend().get();
}

#else

GroupPtr AsGroup(c10::intrusive_ptr<GroupImpl> impl, const std::string&,
                 const std::vector<c10::DeviceType>&) {
  return impl;
}

bool AddDeviceImpl(const GroupPtr&, c10::DeviceType, c10::intrusive_ptr<GroupImpl>,
                   const std::string&) {
  return false;
}

GroupImpl* DefaultImpl(const GroupPtr& pg) { return pg.get(); }

#endif

}  // namespace distlm::dist
