#include "common/dist/test_worker.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <torch/types.h>

#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/dist/dist_flags.h"
#include "common/dist/rendezvous.h"
#include "common/runtime/errors.h"

namespace distlm::dist::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

class Checker {
 public:
  explicit Checker(int rank) : rank_(rank) {}

  void Equal(const std::string& what, const at::Tensor& got, const at::Tensor& want) {
    bool ok = got.sizes() == want.sizes() && got.scalar_type() == want.scalar_type() &&
              torch::equal(got, want);
    Record(what, ok, ok ? "" : absl::StrCat("got ", ToString(got), ", want ", ToString(want)));
  }

  void True(const std::string& what, bool ok, const std::string& detail) {
    Record(what, ok, detail);
  }

  std::vector<std::string> failures;

 private:
  static std::string ToString(const at::Tensor& t) {
    std::ostringstream os;
    os << t.flatten().slice(0, 0, 8).to(at::kDouble);
    std::string s = os.str();
    for (char& c : s) {
      if (c == '\n') c = ' ';
    }
    return s;
  }

  void Record(const std::string& what, bool ok, const std::string& detail) {
    std::printf("rank %d: %-28s %s %s\n", rank_, what.c_str(), ok ? "ok" : "FAIL",
                detail.c_str());
    if (!ok) failures.push_back(absl::StrCat("rank ", rank_, " ", what, ": ", detail));
  }

  int rank_;
};

at::Tensor F(at::Tensor t) { return t.to(at::kFloat); }

}  // namespace

namespace {

// allreduce (four reductions over three dtypes) and broadcast.
void CheckReductions(c10d::ProcessGroup& pg, int r, int w, Checker& check) {
  {  // allreduce, four reductions over three dtypes
    std::vector<at::Tensor> t = {torch::arange(1000, at::kFloat) * (r + 1)};
    pg.allreduce(t)->wait();
    check.Equal("allreduce sum float", t[0], torch::arange(1000, at::kFloat) * (w * (w + 1) / 2));

    c10d::AllreduceOptions max;
    max.reduceOp = c10d::ReduceOp::MAX;
    std::vector<at::Tensor> m = {torch::full({5}, 7 * r, at::kLong)};
    pg.allreduce(m, max)->wait();
    check.Equal("allreduce max int64", m[0], torch::full({5}, 7 * (w - 1), at::kLong));

    c10d::AllreduceOptions min;
    min.reduceOp = c10d::ReduceOp::MIN;
    std::vector<at::Tensor> n = {torch::full({3}, r + 0.5, at::kDouble)};
    pg.allreduce(n, min)->wait();
    check.Equal("allreduce min double", n[0], torch::full({3}, 0.5, at::kDouble));

    c10d::AllreduceOptions prod;
    prod.reduceOp = c10d::ReduceOp::PRODUCT;
    std::vector<at::Tensor> p = {torch::full({4}, r + 1.0, at::kFloat)};
    pg.allreduce(p, prod)->wait();
    double factorial = 1;
    for (int i = 1; i <= w; ++i) factorial *= i;
    check.Equal("allreduce product float", p[0], torch::full({4}, factorial, at::kFloat));
  }

  {  // broadcast from the last rank: everyone ends with the root's tensor
    std::vector<at::Tensor> t = {torch::arange(7, at::kFloat) + 100 * r};
    c10d::BroadcastOptions opts;
    opts.rootRank = w - 1;
    pg.broadcast(t, opts)->wait();
    check.Equal("broadcast from last", t[0], torch::arange(7, at::kFloat) + 100 * (w - 1));
  }
}

// gather to either end, scatter, allgather.
void CheckGatherScatter(c10d::ProcessGroup& pg, int r, int w, Checker& check) {
  for (int root : {0, w - 1}) {  // gather: the root sees every rank's tensor in rank order
    std::vector<at::Tensor> in = {torch::arange(3, at::kFloat) + 10 * r};
    std::vector<std::vector<at::Tensor>> out;
    if (r == root) {
      out.resize(1);
      for (int j = 0; j < w; ++j) out[0].push_back(torch::full({3}, -1.0f));
    }
    c10d::GatherOptions opts;
    opts.rootRank = root;
    pg.gather(out, in, opts)->wait();
    if (r == root) {
      for (int j = 0; j < w; ++j) {
        check.Equal(absl::StrCat("gather to ", root, " slot ", j), out[0][j],
                    torch::arange(3, at::kFloat) + 10 * j);
      }
    }
  }

  {  // scatter from the last rank: rank j receives slot j
    std::vector<at::Tensor> out = {torch::full({4}, -1.0f)};
    std::vector<std::vector<at::Tensor>> in;
    if (r == w - 1) {
      in.resize(1);
      for (int j = 0; j < w; ++j) in[0].push_back(torch::arange(4, at::kFloat) * (j + 1));
    }
    c10d::ScatterOptions opts;
    opts.rootRank = w - 1;
    pg.scatter(out, in, opts)->wait();
    check.Equal("scatter from last", out[0], torch::arange(4, at::kFloat) * (r + 1));
  }

  {  // allgather: every rank sees every rank's tensor
    std::vector<at::Tensor> in = {torch::full({2, 2}, r, at::kFloat)};
    std::vector<std::vector<at::Tensor>> out(1);
    for (int j = 0; j < w; ++j) out[0].push_back(torch::full({2, 2}, -1.0f));
    pg.allgather(out, in)->wait();
    for (int j = 0; j < w; ++j) {
      check.Equal(absl::StrCat("allgather slot ", j), out[0][j], torch::full({2, 2}, j, at::kFloat));
    }
  }
}

// barrier, and collectives in flight at once.
void CheckOrdering(c10d::ProcessGroup& pg, int r, int w, Checker& check) {
  {  // barrier: nobody leaves before rank 0, which arrives 400 ms late
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
    auto t0 = Clock::now();
    pg.barrier()->wait();
    double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r != 0) {
      check.True("barrier waits for rank 0", waited > 0.3, absl::StrCat("waited ", waited, " s"));
    }
  }

  {  // several collectives in flight at once, waited for in reverse order
    std::vector<at::Tensor> a = {torch::ones({64}) * (r + 1)};
    std::vector<at::Tensor> b = {torch::full({32}, r, at::kDouble)};
    std::vector<at::Tensor> c = {torch::arange(16, at::kFloat) * (r + 1)};
    c10d::AllreduceOptions max;
    max.reduceOp = c10d::ReduceOp::MAX;
    auto wa = pg.allreduce(a);
    auto wb = pg.allreduce(b, max);
    c10d::BroadcastOptions root0;
    auto wc = pg.broadcast(c, root0);
    wc->wait();
    wb->wait();
    wa->wait();
    check.Equal("async allreduce a", a[0], torch::ones({64}) * (w * (w + 1) / 2));
    check.Equal("async allreduce b", b[0], torch::full({32}, w - 1, at::kDouble));
    check.Equal("async broadcast c", c[0], torch::arange(16, at::kFloat));
  }
}

// MPI only: narrow sums, reduce, reduce_scatter and the flat (_base) collectives.
void CheckMpiReductions(c10d::ProcessGroup& pg, int r, int w, Checker& check) {
  // float16 and bfloat16 sums (--comm_dtype): integers small enough that every partial sum is
  // exact in both, so the result does not depend on MPI's order of reduction.
  for (at::ScalarType narrow : {at::kHalf, at::kBFloat16}) {
    std::vector<at::Tensor> t = {(torch::arange(20, at::kFloat) * (r + 1)).to(narrow)};
    pg.allreduce(t)->wait();
    check.Equal(absl::StrCat("allreduce sum ", c10::toString(narrow)), t[0],
                (torch::arange(20, at::kFloat) * (w * (w + 1) / 2)).to(narrow));
  }

  {  // reduce to rank 1 % w; the others keep their input
    std::vector<at::Tensor> t = {torch::full({6}, r + 1.0, at::kDouble)};
    c10d::ReduceOptions opts;
    opts.rootRank = 1 % w;
    pg.reduce(t, opts)->wait();
    double want = r == 1 % w ? w * (w + 1) / 2.0 : r + 1.0;
    check.Equal("reduce to 1", t[0], torch::full({6}, want, at::kDouble));
  }

  {  // reduce_scatter: slot j of rank s is s*w + j, so rank r gets sum_s (s*w + r)
    std::vector<at::Tensor> out = {torch::full({3}, -1.0f)};
    std::vector<std::vector<at::Tensor>> in(1);
    for (int j = 0; j < w; ++j) in[0].push_back(torch::full({3}, r * w + j, at::kFloat));
    pg.reduce_scatter(out, in)->wait();
    check.Equal("reduce_scatter", out[0], torch::full({3}, w * w * (w - 1) / 2 + w * r, at::kFloat));
  }

  {  // _reduce_scatter_base: input arange(3w) + s on rank s; rank r gets its third of the sum
    at::Tensor in = torch::arange(3 * w, at::kFloat) + r;
    at::Tensor out = torch::full({3}, -1.0f);
    pg._reduce_scatter_base(out, in)->wait();
    check.Equal("_reduce_scatter_base", out,
                torch::arange(3 * r, 3 * r + 3, at::kFloat) * w + w * (w - 1) / 2);
  }

  {  // _allgather_base: rank r contributes three r's
    at::Tensor in = torch::full({3}, r, at::kLong);
    at::Tensor out = torch::full({3 * w}, -1, at::kLong);
    pg._allgather_base(out, in)->wait();
    check.Equal("_allgather_base", out, torch::arange(w, at::kLong).repeat_interleave(3));
  }
}

// MPI only: non-contiguous tensors, futures, argument errors.
void CheckStagingAndErrors(c10d::ProcessGroup& pg, int r, int w, Checker& check) {
  {  // non-contiguous tensors are staged and written back into the view
    at::Tensor base = torch::arange(12, at::kFloat).view({3, 4}) * (r + 1);
    std::vector<at::Tensor> t = {base.t()};
    pg.allreduce(t)->wait();
    check.Equal("allreduce non-contiguous", base,
                torch::arange(12, at::kFloat).view({3, 4}) * (w * (w + 1) / 2));
  }

  {  // the future completes with the result, as DDP comm hooks expect
    std::vector<at::Tensor> t = {torch::ones({8}) * (r + 1)};
    auto fut = pg.allreduce(t)->getFuture();
    fut->wait();
    check.Equal("future value", F(fut->value().toTensorVector()[0]),
                torch::ones({8}) * (w * (w + 1) / 2));
  }

  {  // argument errors throw at once, in the caller, with the operation named
    std::vector<at::Tensor> in = {torch::ones({2})};
    std::vector<std::vector<at::Tensor>> out(1, {torch::ones({2})});  // one slot, w needed
    std::string error;
    try {
      pg.allgather(out, in);
    } catch (const std::exception& e) {
      error = OneLine(e);
    }
    bool ok = w == 1 ? error.empty()
                     : error.find("allgather: needs " + std::to_string(w) + " output") !=
                           std::string::npos;
    check.True("allgather wrong slot count", ok, error);

    c10d::AllreduceOptions avg;
    avg.reduceOp = c10d::ReduceOp::AVG;
    error.clear();
    try {
      pg.allreduce(in, avg);
    } catch (const std::exception& e) {
      error = OneLine(e);
    }
    check.True("allreduce AVG refused", error.find("allreduce: ReduceOp AVG is not supported") != std::string::npos,
               error);
  }
}

}  // namespace

std::vector<std::string> CheckCollectives(DistContext& ctx, bool mpi_only) {
  const int r = ctx.rank;
  const int w = ctx.world_size;
  auto& pg = *ctx.pg;
  Checker check(r);
  CheckReductions(pg, r, w, check);
  CheckGatherScatter(pg, r, w, check);
  CheckOrdering(pg, r, w, check);
  if (!mpi_only) return check.failures;
  CheckMpiReductions(pg, r, w, check);
  CheckStagingAndErrors(pg, r, w, check);
  return check.failures;
}

// Point to point as task 7b's pipelines use it. Every rank sends to the next rank of a ring and
// to the previous one before receiving from either (both directions at once, as activations go
// forward while gradients come back): a message of 4 MiB (past any eager limit, so a send that
// waited for its receive would deadlock) and a small one, received in the other order than
// sent (matched by tag), with an all-reduce of the world between posting and receiving. Then
// along the rows of a 2-column grid (task 7c's pipelines), and, on MPI, a receive into a larger
// tensor than was sent, which must fail naming both sizes.
std::vector<std::string> CheckSendRecv(DistContext& ctx) {
  std::vector<std::string> failures;
  auto expect = [&](const std::string& what, double got, double want) {
    if (got != want) failures.push_back(absl::StrCat(what, ": got ", got, ", want ", want));
  };
  const int r = ctx.rank, w = ctx.world_size, next = (r + 1) % w, prev = (r + w - 1) % w;
  const int64_t big = 1 << 20;
  for (int round = 0; round < 3; ++round) {
    std::vector<at::Tensor> big_out = {torch::full({big}, r * 100.0 + round)}, small_out = {torch::full({3}, r + 0.5)},
                            back_out = {torch::full({7}, -r - 1.0)};
    auto s1 = ctx.pg->send(big_out, next, 2 * round + 1);
    auto s0 = ctx.pg->send(small_out, next, 2 * round);
    auto s2 = ctx.pg->send(back_out, prev, 1000 + round);
    std::vector<at::Tensor> ones = {torch::ones({2})};
    ctx.pg->allreduce(ones)->wait();
    std::vector<at::Tensor> small_in = {torch::zeros({3})}, back_in = {torch::zeros({7})},
                            big_in = {torch::zeros({big})};
    ctx.pg->recv(small_in, prev, 2 * round)->wait();
    ctx.pg->recv(back_in, next, 1000 + round)->wait();
    ctx.pg->recv(big_in, prev, 2 * round + 1)->wait();
    for (auto& s : {s0, s1, s2}) s->wait();
    expect(absl::StrCat("round ", round, ": all-reduce between sends and receives"), ones[0][1].item<double>(), w);
    expect(absl::StrCat("round ", round, ": small message from rank ", prev), small_in[0][2].item<double>(),
           prev + 0.5);
    expect(absl::StrCat("round ", round, ": backward message from rank ", next), back_in[0][6].item<double>(),
           -next - 1.0);
    expect(absl::StrCat("round ", round, ": 4 MiB message from rank ", prev, ", last value"),
           big_in[0][big - 1].item<double>(), prev * 100.0 + round);
    expect(absl::StrCat("round ", round, ": 4 MiB message from rank ", prev, ", its sum"),
           big_in[0].sum().item<double>(), static_cast<double>(big) * (prev * 100.0 + round));
  }
  if (w % 2 == 0) {
    std::vector<std::vector<int>> rows(w / 2);
    for (int q = 0; q < w; ++q) rows[q / 2].push_back(q);
    GroupPtr row = NewSubgroup(ctx, rows, "p2p_rows");
    const int other = 1 - row->getRank();
    std::vector<at::Tensor> out = {torch::full({4}, r * 1.0)}, in = {torch::zeros({4})};
    auto s = row->send(out, other, 0);
    row->recv(in, other, 0)->wait();
    s->wait();
    expect("row message from the other rank of the row", in[0][3].item<double>(), r - r % 2 + other);
  }
  if (ctx.backend_name == "mpi" && w >= 2 && r < 2) {
    std::vector<at::Tensor> three = {torch::full({3}, 1.0)}, four = {torch::zeros({4})};
    std::string error = "(none)";
    if (r == 0) {
      ctx.pg->send(three, 1, 77)->wait();
    } else {
      try {
        ctx.pg->recv(four, 0, 77)->wait();
      } catch (const std::exception& e) {
        error = e.what();
      }
      if (error.find("received 12 bytes from rank 0 with tag 77, the tensor holds 16") == std::string::npos) {
        failures.push_back("a short message: want an error naming 12 and 16 bytes, got " + error);
      }
    }
  }
  std::vector<at::Tensor> done = {torch::ones({1})};
  ctx.pg->allreduce(done)->wait();  // nobody leaves while another still receives
  return failures;
}

bool IsWorker() { return std::getenv("DISTLM_DIST_TEST_MODE") != nullptr; }

int WorkerMain(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return RunMain([] {
    const std::string mode = Env("DISTLM_DIST_TEST_MODE");
    DistConfig config = DistConfigFromFlagsAndEnv();
    DistContext ctx = InitDistributed(config);
    std::printf("rank %d of %d: backend=%s source=%s local_rank=%d init=%.3f s\n", ctx.rank,
                ctx.world_size, ctx.backend_name.c_str(), config.source.c_str(),
                config.local_rank, ctx.init_seconds);
    std::fflush(stdout);
    if (mode == "init") {
      // Rank 0 may be asked to keep the store up until a second claimant of a rank has come.
      int claims = std::atoi(Env("DISTLM_DIST_TEST_AWAIT_CLAIMS", "0").c_str());
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while (claims > 0 && RankClaims(*ctx.store, 1) < claims && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      return 0;
    }
    if (mode == "collectives") {
      auto t0 = Clock::now();
      auto failures = CheckCollectives(ctx, ctx.backend_name == "mpi");
      // Equal values pass, long ones (compared by fingerprint) included.
      CheckAgreement(ctx, "world size", std::to_string(ctx.world_size));
      CheckAgreement(ctx, "model config", std::string(500, 'x'));
      std::printf("rank %d: agreement ok\n", ctx.rank);
      std::printf("rank %d: collectives took %.3f s, %zu failures\n", ctx.rank,
                  std::chrono::duration<double>(Clock::now() - t0).count(), failures.size());
      return failures.empty() ? 0 : 3;
    }
    if (mode == "subgroups") {
      // A grid of 2 columns: rows {0, 1}, {2, 3}, ... and columns {0, 2, ...}, {1, 3, ...}, as
      // task 7c's tensor and data groups; each group's sums, ranks and sizes against closed forms,
      // the groups' collectives interleaved with the world's.
      if (ctx.world_size % 2 != 0) throw UserError("subgroups: needs an even world size");
      std::vector<std::vector<int>> rows(ctx.world_size / 2), columns(2);
      for (int r = 0; r < ctx.world_size; ++r) {
        rows[r / 2].push_back(r);
        columns[r % 2].push_back(r);
      }
      GroupPtr row = NewSubgroup(ctx, rows, "rows");
      GroupPtr column = NewSubgroup(ctx, columns, "columns");
      std::vector<std::string> failures;
      auto expect = [&](const std::string& what, double got, double want) {
        if (got != want) failures.push_back(absl::StrCat(what, ": got ", got, ", want ", want));
      };
      const int r = ctx.rank;
      expect("row rank", row->getRank(), r % 2);
      expect("row size", row->getSize(), 2);
      expect("column rank", column->getRank(), r / 2);
      expect("column size", column->getSize(), ctx.world_size / 2);
      for (int round = 0; round < 3; ++round) {
        std::vector<at::Tensor> a = {torch::full({5}, r + 1.0)}, b = {torch::full({3}, r + 1.0)},
                                c = {torch::full({2}, r + 1.0)};
        row->allreduce(a)->wait();
        ctx.pg->allreduce(c)->wait();
        column->allreduce(b)->wait();
        const int first = r - r % 2;
        expect(absl::StrCat("row sum, round ", round), a[0][4].item<double>(), (first + 1) + (first + 2));
        double column_sum = 0;
        for (int q = r % 2; q < ctx.world_size; q += 2) column_sum += q + 1;
        expect(absl::StrCat("column sum, round ", round), b[0][2].item<double>(), column_sum);
        expect(absl::StrCat("world sum, round ", round), c[0][1].item<double>(),
               ctx.world_size * (ctx.world_size + 1) / 2.0);
      }
      std::vector<at::Tensor> from_first = {torch::full({4}, r * 10.0)};
      column->broadcast(from_first)->wait();
      expect("column broadcast from its rank 0", from_first[0][3].item<double>(), (r % 2) * 10.0);
      for (const auto& f : failures) std::printf("rank %d: subgroups FAIL %s\n", r, f.c_str());
      if (failures.empty()) std::printf("rank %d: subgroups ok\n", r);
      return failures.empty() ? 0 : 3;
    }
    if (mode == "sendrecv") {
      const auto failures = CheckSendRecv(ctx);
      for (const auto& f : failures) std::printf("rank %d: sendrecv FAIL %s\n", ctx.rank, f.c_str());
      if (failures.empty()) std::printf("rank %d: sendrecv ok\n", ctx.rank);
      return failures.empty() ? 0 : 3;
    }
    if (mode == "agree") {
      CheckAgreement(ctx, "model config", Env("DISTLM_DIST_TEST_VALUE"));
      std::printf("rank %d: agreement ok\n", ctx.rank);
      return 0;
    }
    const int victim = std::atoi(Env("DISTLM_DIST_TEST_DIE_RANK", "1").c_str());
    if (mode == "die" || mode == "hang") {
      // Everyone is connected; now one rank goes away and the others must notice.
      ctx.pg->barrier()->wait();
      if (ctx.rank == victim) {
        std::fflush(stdout);
        if (mode == "die") raise(SIGKILL);
        // Alive but absent from the collective. Under mpirun, mpirun ends it; over a store,
        // it leaves once rank 0 (and with it the store) has gone.
        const auto deadline = Clock::now() + std::chrono::seconds(120);
        while (Clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          if (!ctx.store) continue;
          try {
            RankClaims(*ctx.store, 0);
          } catch (const std::exception&) {
            return 0;
          }
        }
        return 0;
      }
      for (int step = 0;; ++step) {
        std::vector<at::Tensor> t = {torch::ones({1 << 16})};
        try {
          ctx.pg->allreduce(t)->wait();
        } catch (const std::exception& e) {
          throw LostRankError(ctx, e);
        }
      }
    }
    throw UserError("unknown DISTLM_DIST_TEST_MODE=" + mode);
  });
}

}  // namespace distlm::dist::testing
