#include "common/dist/mpi_runtime.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/dist/mpi_datatypes.h"
#include "common/runtime/errors.h"

namespace distlm::dist::mpi_internal {

std::atomic<bool> g_abandoned{false};
std::mutex g_mpi_mutex;

namespace {

void FinalizeAtExit() {
  if (g_abandoned.load()) return;
  std::lock_guard<std::mutex> lock(g_mpi_mutex);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

void InitMpiOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = 0;
    if (initialized) {
      // Someone else initialised MPI (and will finalise it); it must still allow our thread.
      MPI_Query_thread(&provided);
    } else {
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      std::atexit(FinalizeAtExit);
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      throw UserError(absl::StrCat(
          "--backend=mpi: this MPI provides thread level ", provided,
          ", below MPI_THREAD_SERIALIZED, which the MPI group's worker thread needs"));
    }
    MakeNarrowTypes();
  });
}

void CheckMpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(absl::StrCat(call, " failed: ", std::string(text, len)));
}

}  // namespace distlm::dist::mpi_internal
