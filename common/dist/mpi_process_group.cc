#include "common/dist/mpi_process_group.h"

// The C API only: Open MPI's deprecated C++ bindings live in a library we do not link.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/runtime/errors.h"

namespace distlm::dist {
namespace {

// Set once a group has been given up on (a worker stuck inside MPI, or torn down by an
// exception): MPI_Finalize would then wait for ranks that are not coming, so the process
// exits without it and mpirun ends the job.
std::atomic<bool> g_abandoned{false};

// MPI_THREAD_SERIALIZED allows MPI from any thread but never from two at once; every MPI call
// after initialisation holds this.
std::mutex g_mpi_mutex;

void FinalizeAtExit() {
  if (g_abandoned.load()) return;
  std::lock_guard<std::mutex> lock(g_mpi_mutex);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// float16 and bfloat16, which MPI has no types for: 2-byte types of our own, and a SUM that
// adds in float32 and rounds the result to the narrow type (once per pair of addends, as Gloo's
// float16 sum does). Made once, right after MPI_Init, before any worker thread exists.
MPI_Datatype g_half_type = MPI_DATATYPE_NULL;
MPI_Datatype g_bfloat16_type = MPI_DATATYPE_NULL;
MPI_Op g_half_sum = MPI_OP_NULL;
MPI_Op g_bfloat16_sum = MPI_OP_NULL;

template <typename T>
void SumInFloat(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = static_cast<T>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

void MakeNarrowTypes() {
  MPI_Type_contiguous(2, MPI_BYTE, &g_half_type);
  MPI_Type_commit(&g_half_type);
  MPI_Type_contiguous(2, MPI_BYTE, &g_bfloat16_type);
  MPI_Type_commit(&g_bfloat16_type);
  MPI_Op_create(&SumInFloat<c10::Half>, /*commute=*/1, &g_half_sum);
  MPI_Op_create(&SumInFloat<c10::BFloat16>, /*commute=*/1, &g_bfloat16_sum);
}

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

int Count(int64_t n, const char* op) {
  TORCH_CHECK(n <= INT_MAX, "MpiProcessGroup::", op, ": ", n,
              " exceeds the int count of one MPI call; split the tensor");
  return static_cast<int>(n);
}

void CheckTensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "MpiProcessGroup::", op, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "MpiProcessGroup::", op,
              ": tensors must be on the CPU, got one on ", t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "MpiProcessGroup::", op,
              ": only dense (strided) tensors are supported");
}

void CheckSingle(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "MpiProcessGroup::", op, ": takes exactly one tensor, got ",
              ts.size());
  CheckTensor(ts[0], op);
}

void CheckRoot(int64_t root, int size, const char* op) {
  TORCH_CHECK(root >= 0 && root < size, "MpiProcessGroup::", op, ": root rank ", root,
              " is not in 0..", size - 1);
}

// Every tensor in `ts` must match `like` in dtype and element count: one slot per rank.
void CheckSlots(const std::vector<at::Tensor>& ts, const at::Tensor& like, int size,
                const char* op, const char* which) {
  TORCH_CHECK(static_cast<int>(ts.size()) == size, "MpiProcessGroup::", op, ": needs ", size,
              " ", which, " tensors (one per rank), got ", ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    CheckTensor(ts[i], op);
    TORCH_CHECK(ts[i].scalar_type() == like.scalar_type(), "MpiProcessGroup::", op, ": ",
                which, " tensor ", i, " is ", ts[i].scalar_type(), ", expected ",
                like.scalar_type());
    TORCH_CHECK(ts[i].numel() == like.numel(), "MpiProcessGroup::", op, ": ", which,
                " tensor ", i, " has ", ts[i].numel(), " elements, expected ", like.numel());
  }
}

MPI_Datatype ReductionType(at::ScalarType t, const char* op) {
  switch (t) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kChar: return MPI_INT8_T;
    case at::kShort: return MPI_INT16_T;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kHalf: return g_half_type;
    case at::kBFloat16: return g_bfloat16_type;
    default:
      TORCH_CHECK(false, "MpiProcessGroup::", op, ": MPI cannot reduce ", t,
                  " tensors; use float, double, half, bfloat16 or an integer type");
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op ReductionOp(const c10d::ReduceOp& reduce_op, at::ScalarType t, const char* op) {
  if (t == at::kHalf || t == at::kBFloat16) {
    TORCH_CHECK(reduce_op == c10d::ReduceOp::SUM, "MpiProcessGroup::", op, ": ", t,
                " tensors reduce with SUM only (summed in float32, rounded to ", t, ")");
    return t == at::kHalf ? g_half_sum : g_bfloat16_sum;
  }
  switch (static_cast<c10d::ReduceOp::RedOpType>(reduce_op)) {
    case c10d::ReduceOp::SUM: return MPI_SUM;
    case c10d::ReduceOp::PRODUCT: return MPI_PROD;
    case c10d::ReduceOp::MIN: return MPI_MIN;
    case c10d::ReduceOp::MAX: return MPI_MAX;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(at::isIntegralType(t, /*includeBool=*/false), "MpiProcessGroup::", op,
                  ": bitwise reductions need an integer tensor, got ", t);
      if (reduce_op == c10d::ReduceOp::BAND) return MPI_BAND;
      if (reduce_op == c10d::ReduceOp::BOR) return MPI_BOR;
      return MPI_BXOR;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(false, "MpiProcessGroup::", op, ": ReduceOp AVG is not supported (nor in "
                  "Gloo): reduce with SUM and divide by the world size");
      break;
    default:
      TORCH_CHECK(false, "MpiProcessGroup::", op, ": ReduceOp ",
                  static_cast<int>(static_cast<c10d::ReduceOp::RedOpType>(reduce_op)),
                  " is not supported: use SUM, PRODUCT, MIN, MAX, BAND, BOR or BXOR");
  }
  return MPI_OP_NULL;
}

// A contiguous buffer for `t`: `t` itself, or a copy whose result CopyBack() writes into `t`.
struct Staged {
  at::Tensor original;
  at::Tensor buffer;
  void CopyBack() {
    if (!buffer.is_same(original)) original.copy_(buffer);
  }
};

Staged Stage(const at::Tensor& t) { return {t, t.contiguous()}; }

// Row i of a [size, n] buffer into each slot, whatever the slot's shape.
void Unpack(const at::Tensor& rows, std::vector<at::Tensor>& slots) {
  for (size_t i = 0; i < slots.size(); ++i) {
    slots[i].copy_(rows[static_cast<int64_t>(i)].view(slots[i].sizes()));
  }
}

// The slots, flattened and stacked into one contiguous [size, n] buffer.
at::Tensor Pack(const std::vector<at::Tensor>& slots) {
  std::vector<at::Tensor> flat;
  flat.reserve(slots.size());
  for (const auto& s : slots) flat.push_back(s.reshape({-1}));
  return at::stack(flat);
}

at::Tensor Rows(int size, const at::Tensor& like) {
  return at::empty({size, like.numel()}, at::TensorOptions().dtype(like.scalar_type()));
}

class MpiWork : public c10d::Work {
 public:
  MpiWork(c10d::OpType op, std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout)
      : Work(-1, op),
        outputs_(std::move(outputs)),
        timeout_(timeout),
        future_(c10::make_intrusive<at::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  // Waits at most `timeout` (the group's --dist_timeout_s when none is given): MPI has no
  // timeout of its own, so this is where a lost rank turns into an error instead of a hang.
  bool wait(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    auto limit = timeout > std::chrono::milliseconds(0) ? timeout : timeout_;
    if (!cv_.wait_for(lock, limit, [&] { return completed_; })) {
      g_abandoned = true;
      throw UserError(absl::StrCat(
          "MPI ", absl::AsciiStrToLower(c10d::opTypeToString(opType_)), " did not finish within ",
          std::chrono::duration<double>(limit).count(),
          " s (--dist_timeout_s): a rank is stuck or gone"));
    }
    if (exception_) std::rethrow_exception(exception_);
    return true;
  }

  std::vector<at::Tensor> result() override { return outputs_; }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  void Finish(std::exception_ptr error) {
    // The future first, so whoever wakes from wait() finds it complete too.
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
    finish(error);
  }

 private:
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<at::ivalue::Future> future_;
};

}  // namespace

struct MpiProcessGroup::Worker {
  struct Entry {
    c10::intrusive_ptr<MpiWork> work;
    std::function<void()> run;
  };

  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Entry> queue;
  bool stop = false;
  bool exited = false;
  MPI_Comm comm = MPI_COMM_NULL;
  std::chrono::milliseconds timeout{0};
  std::thread thread;

  void Loop() {
    // Output slots may be leaves that require grad; the copies into them are not autograd's.
    at::NoGradGuard no_grad;
    for (;;) {
      Entry entry;
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (queue.empty()) break;  // stopping, and everything queued has run
        entry = std::move(queue.front());
        queue.pop_front();
      }
      std::exception_ptr error;
      try {
        std::lock_guard<std::mutex> mpi(g_mpi_mutex);
        entry.run();
      } catch (...) {
        error = std::current_exception();
      }
      entry.work->Finish(error);
    }
    {
      std::lock_guard<std::mutex> mpi(g_mpi_mutex);
      MPI_Comm_free(&comm);
    }
    std::lock_guard<std::mutex> lock(mutex);
    exited = true;
    cv.notify_all();
  }
};

c10::intrusive_ptr<MpiProcessGroup> MpiProcessGroup::CreateWorld(
    std::chrono::milliseconds timeout) {
  InitMpiOnce();
  auto worker = std::make_shared<Worker>();
  worker->timeout = timeout;
  int rank = 0, size = 0;
  {
    std::lock_guard<std::mutex> mpi(g_mpi_mutex);
    CheckMpi(MPI_Comm_dup(MPI_COMM_WORLD, &worker->comm), "MPI_Comm_dup");
    // Errors come back as codes (and then exceptions on the Work) instead of aborting the job
    // with MPI's own message.
    CheckMpi(MPI_Comm_set_errhandler(worker->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    CheckMpi(MPI_Comm_rank(worker->comm, &rank), "MPI_Comm_rank");
    CheckMpi(MPI_Comm_size(worker->comm, &size), "MPI_Comm_size");
  }
  worker->thread = std::thread([w = worker] { w->Loop(); });
  return c10::make_intrusive<MpiProcessGroup>(rank, size, std::move(worker));
}

MpiProcessGroup::MpiProcessGroup(int rank, int size, std::shared_ptr<Worker> worker)
    : GroupImpl(rank, size), worker_(std::move(worker)) {
  init();
}

MpiProcessGroup::~MpiProcessGroup() {
  // Torn down by an exception: the other ranks may be inside a collective this rank will never
  // join, so queued work is dropped and the process must not finalise (see the header).
  const bool unwinding = std::uncaught_exceptions() > 0;
  std::deque<Worker::Entry> dropped;
  {
    std::lock_guard<std::mutex> lock(worker_->mutex);
    worker_->stop = true;
    if (unwinding) dropped.swap(worker_->queue);
  }
  worker_->cv.notify_all();
  for (auto& e : dropped) {
    e.work->Finish(std::make_exception_ptr(
        std::runtime_error("MPI group destroyed before this collective ran")));
  }
  if (unwinding) g_abandoned = true;
  // Queued work drains first; a worker still inside MPI after the timeout is stuck for good.
  std::unique_lock<std::mutex> lock(worker_->mutex);
  auto limit = unwinding ? std::chrono::milliseconds(1000) : worker_->timeout;
  if (worker_->cv.wait_for(lock, limit, [&] { return worker_->exited; })) {
    lock.unlock();
    worker_->thread.join();
  } else {
    lock.unlock();
    g_abandoned = true;
    worker_->thread.detach();
  }
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::Enqueue(c10d::OpType op,
                                                        std::vector<at::Tensor> outputs,
                                                        std::function<void()> run) {
  auto work = c10::make_intrusive<MpiWork>(op, std::move(outputs), worker_->timeout);
  {
    std::lock_guard<std::mutex> lock(worker_->mutex);
    TORCH_CHECK(!worker_->stop, "MpiProcessGroup: the group is shutting down");
    worker_->queue.push_back({work, std::move(run)});
  }
  worker_->cv.notify_all();
  return work;
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  CheckSingle(tensors, "broadcast");
  CheckRoot(opts.rootRank, size_, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "MpiProcessGroup::broadcast: rootTensor must be 0");
  Staged t = Stage(tensors[0]);
  int bytes = Count(t.buffer.nbytes(), "broadcast");
  int root = static_cast<int>(opts.rootRank);
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::BROADCAST, tensors, [t, bytes, root, comm]() mutable {
    CheckMpi(MPI_Bcast(t.buffer.data_ptr(), bytes, MPI_BYTE, root, comm), "MPI_Bcast");
    t.CopyBack();
  });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  CheckSingle(tensors, "allreduce");
  MPI_Datatype type = ReductionType(tensors[0].scalar_type(), "allreduce");
  MPI_Op op = ReductionOp(opts.reduceOp, tensors[0].scalar_type(), "allreduce");
  Staged t = Stage(tensors[0]);
  int n = Count(t.buffer.numel(), "allreduce");
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::ALLREDUCE, tensors, [t, n, type, op, comm]() mutable {
    CheckMpi(MPI_Allreduce(MPI_IN_PLACE, t.buffer.data_ptr(), n, type, op, comm),
             "MPI_Allreduce");
    t.CopyBack();
  });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  CheckSingle(tensors, "reduce");
  CheckRoot(opts.rootRank, size_, "reduce");
  MPI_Datatype type = ReductionType(tensors[0].scalar_type(), "reduce");
  MPI_Op op = ReductionOp(opts.reduceOp, tensors[0].scalar_type(), "reduce");
  Staged t = Stage(tensors[0]);
  int n = Count(t.buffer.numel(), "reduce");
  int root = static_cast<int>(opts.rootRank);
  bool is_root = root == rank_;
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::REDUCE, tensors, [t, n, type, op, root, is_root, comm]() mutable {
    void* data = t.buffer.data_ptr();
    if (is_root) {
      CheckMpi(MPI_Reduce(MPI_IN_PLACE, data, n, type, op, root, comm), "MPI_Reduce");
      t.CopyBack();
    } else {
      CheckMpi(MPI_Reduce(data, nullptr, n, type, op, root, comm), "MPI_Reduce");
    }
  });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  CheckSingle(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "MpiProcessGroup::allgather: takes one output list, got ",
              outputs.size());
  CheckSlots(outputs[0], inputs[0], size_, "allgather", "output");
  at::Tensor in = inputs[0].contiguous();
  int bytes = Count(in.nbytes(), "allgather");
  std::vector<at::Tensor> slots = outputs[0];
  int size = size_;
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::ALLGATHER, slots, [in, bytes, slots, size, comm]() mutable {
    at::Tensor rows = Rows(size, in);
    CheckMpi(MPI_Allgather(in.data_ptr(), bytes, MPI_BYTE, rows.data_ptr(), bytes, MPI_BYTE,
                           comm),
             "MPI_Allgather");
    Unpack(rows, slots);
  });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) {
  CheckTensor(input, "_allgather_base");
  CheckTensor(output, "_allgather_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "MpiProcessGroup::_allgather_base: output is ", output.scalar_type(),
              ", input is ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size_,
              "MpiProcessGroup::_allgather_base: output has ", output.numel(),
              " elements, expected world size ", size_, " x input ", input.numel());
  at::Tensor in = input.contiguous();
  Staged out = Stage(output);
  int bytes = Count(in.nbytes(), "_allgather_base");
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, [in, out, bytes, comm]() mutable {
    CheckMpi(MPI_Allgather(in.data_ptr(), bytes, MPI_BYTE, out.buffer.data_ptr(), bytes,
                           MPI_BYTE, comm),
             "MPI_Allgather");
    out.CopyBack();
  });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  CheckSingle(inputs, "gather");
  CheckRoot(opts.rootRank, size_, "gather");
  int root = static_cast<int>(opts.rootRank);
  bool is_root = root == rank_;
  std::vector<at::Tensor> slots;
  if (is_root) {
    TORCH_CHECK(outputs.size() == 1, "MpiProcessGroup::gather: the root takes one output list, "
                "got ", outputs.size());
    CheckSlots(outputs[0], inputs[0], size_, "gather", "output");
    slots = outputs[0];
  } else {
    // As in Gloo, so code that runs on one backend runs on the other.
    TORCH_CHECK(outputs.empty(), "MpiProcessGroup::gather: rank ", rank_,
                " is not the root and must pass an empty output list");
  }
  at::Tensor in = inputs[0].contiguous();
  int bytes = Count(in.nbytes(), "gather");
  int size = size_;
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::GATHER, slots,
                 [in, bytes, slots, size, root, is_root, comm]() mutable {
                   at::Tensor rows = is_root ? Rows(size, in) : at::Tensor();
                   CheckMpi(MPI_Gather(in.data_ptr(), bytes, MPI_BYTE,
                                       is_root ? rows.data_ptr() : nullptr, bytes, MPI_BYTE,
                                       root, comm),
                            "MPI_Gather");
                   if (is_root) Unpack(rows, slots);
                 });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  CheckSingle(outputs, "scatter");
  CheckRoot(opts.rootRank, size_, "scatter");
  int root = static_cast<int>(opts.rootRank);
  bool is_root = root == rank_;
  at::Tensor rows;
  if (is_root) {
    TORCH_CHECK(inputs.size() == 1, "MpiProcessGroup::scatter: the root takes one input list, "
                "got ", inputs.size());
    CheckSlots(inputs[0], outputs[0], size_, "scatter", "input");
    rows = Pack(inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty(), "MpiProcessGroup::scatter: rank ", rank_,
                " is not the root and must pass an empty input list");
  }
  Staged out = Stage(outputs[0]);
  int bytes = Count(out.buffer.nbytes(), "scatter");
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::SCATTER, outputs,
                 [rows, out, bytes, root, is_root, comm]() mutable {
                   CheckMpi(MPI_Scatter(is_root ? rows.data_ptr() : nullptr, bytes, MPI_BYTE,
                                        out.buffer.data_ptr(), bytes, MPI_BYTE, root, comm),
                            "MPI_Scatter");
                   out.CopyBack();
                 });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  CheckSingle(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "MpiProcessGroup::reduce_scatter: takes one input list, got ",
              inputs.size());
  CheckSlots(inputs[0], outputs[0], size_, "reduce_scatter", "input");
  MPI_Datatype type = ReductionType(outputs[0].scalar_type(), "reduce_scatter");
  MPI_Op op = ReductionOp(opts.reduceOp, outputs[0].scalar_type(), "reduce_scatter");
  at::Tensor rows = Pack(inputs[0]);
  Staged out = Stage(outputs[0]);
  int n = Count(out.buffer.numel(), "reduce_scatter");
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::REDUCE_SCATTER, outputs,
                 [rows, out, n, type, op, comm]() mutable {
                   CheckMpi(MPI_Reduce_scatter_block(rows.data_ptr(), out.buffer.data_ptr(), n,
                                                     type, op, comm),
                            "MPI_Reduce_scatter_block");
                   out.CopyBack();
                 });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  CheckTensor(input, "_reduce_scatter_base");
  CheckTensor(output, "_reduce_scatter_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "MpiProcessGroup::_reduce_scatter_base: output is ", output.scalar_type(),
              ", input is ", input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * size_,
              "MpiProcessGroup::_reduce_scatter_base: input has ", input.numel(),
              " elements, expected world size ", size_, " x output ", output.numel());
  MPI_Datatype type = ReductionType(output.scalar_type(), "_reduce_scatter_base");
  MPI_Op op = ReductionOp(opts.reduceOp, output.scalar_type(), "_reduce_scatter_base");
  at::Tensor in = input.contiguous();
  Staged out = Stage(output);
  int n = Count(out.buffer.numel(), "_reduce_scatter_base");
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output},
                 [in, out, n, type, op, comm]() mutable {
                   CheckMpi(MPI_Reduce_scatter_block(in.data_ptr(), out.buffer.data_ptr(), n,
                                                     type, op, comm),
                            "MPI_Reduce_scatter_block");
                   out.CopyBack();
                 });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::barrier(const c10d::BarrierOptions&) {
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::BARRIER, {},
                 [comm] { CheckMpi(MPI_Barrier(comm), "MPI_Barrier"); });
}

}  // namespace distlm::dist
