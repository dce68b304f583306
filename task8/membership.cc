#include "task8/membership.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>
#include <thread>

#include <torch/torch.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/runtime/errors.h"

namespace distlm::task8 {
namespace {

using Clock = std::chrono::steady_clock;

// A worker whose heartbeat did not move for this long is lost (dist.h: one beat a second).
constexpr auto kLostWindow = std::chrono::seconds(3);

std::string Key(const std::string& tail) { return "distlm/task8/" + tail; }
std::string TicketKey(int64_t ticket) { return Key(absl::StrCat("join/", ticket)); }
std::string AnswerKey(int64_t ticket) { return Key(absl::StrCat("join/", ticket, "/answer")); }

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string Text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

std::string SlotList(const std::vector<int>& slots) { return absl::StrJoin(slots, ","); }
std::vector<int> ParseSlots(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view s : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(s, &v)) throw std::logic_error("task8 membership: bad slot list '" + text + "'");
    out.push_back(v);
  }
  return out;
}

// The first "what=value" line of `theirs` that differs from `mine`, in words; "" when none.
std::string FingerprintDifference(const std::string& mine, const std::string& theirs) {
  auto lines = [](const std::string& text) {
    std::map<std::string, std::string> m;
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      const size_t eq = line.find('=');
      m[std::string(line.substr(0, eq))] = eq == absl::string_view::npos ? "" : std::string(line.substr(eq + 1));
    }
    return m;
  };
  const auto a = lines(mine), b = lines(theirs);
  for (const auto& [what, value] : a) {
    auto it = b.find(what);
    if (it == b.end()) return "it has no " + what;
    if (it->second != value) return "its " + what + " is " + it->second.substr(0, 60) + ", the workers' " + value.substr(0, 60);
  }
  for (const auto& [what, value] : b) {
    if (!a.count(what)) return "it has a " + what + " the workers have not";
  }
  return "";
}

std::chrono::milliseconds Millis(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

// A store that no longer answers: slot 0's process (its host) is gone.
[[noreturn]] void StoreGone(const dist::DistContext& ctx, const std::exception& e) {
  throw UserError(absl::StrCat("the rendezvous store at ", ctx.config.master_ip, ":", ctx.config.master_port,
                               " (slot 0's process) stopped answering, so the workers cannot meet again: ",
                               OneLine(e)));
}

}  // namespace

Membership::Membership(dist::DistContext& world) : ctx_(world) {
  for (int s = 0; s < world.world_size; ++s) slots_.push_back(s);
  rank_ = world.rank;
  group_ = world.pg;
}

Membership::Membership(dist::DistContext& ctx, int generation, std::vector<int> slots) : ctx_(ctx) {
  Enter(generation, std::move(slots));
}

void Membership::Enter(int generation, std::vector<int> slots) {
  generation_ = generation;
  slots_ = std::move(slots);
  rank_ = static_cast<int>(std::find(slots_.begin(), slots_.end(), slot()) - slots_.begin());
  admits_ = 0;
  group_ = dist::NewGroupOverStore(ctx_, Key(absl::StrCat("gen/", generation, "/pg/")), rank_, size());
}

std::string Membership::Decided(const std::string& key, const std::function<std::string()>& decide) {
  c10d::Store& store = *ctx_.store;
  try {
    if (slot() == 0) {
      const std::string decision = decide();
      store.set(key, Bytes(decision));
      return decision;
    }
    // Slot 0 may first wait out a frozen worker's Gloo deadline and its heartbeat window.
    store.wait({key}, Millis(2 * ctx_.config.timeout_s + 10));
    return Text(store.get(key));
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    StoreGone(ctx_, e);
  }
}

std::unique_ptr<Membership> Membership::Join(dist::DistContext& ctx, const std::string& fingerprint,
                                             double timeout_s) {
  c10d::Store& store = *ctx.store;
  std::string answer;
  int64_t ticket = 0;
  try {
    ticket = store.add(Key("tickets"), 1);
    store.set(TicketKey(ticket), Bytes(absl::StrCat(ctx.rank, "\n", fingerprint)));
    store.wait({AnswerKey(ticket)}, Millis(timeout_s));
    answer = Text(store.get(AnswerKey(ticket)));
  } catch (const std::exception& e) {
    if (ticket > 0) {
      try {
        store.set(AnswerKey(ticket), Bytes("withdrawn"));  // so that slot 0 passes it by
      } catch (const std::exception&) {
      }
    }
    throw UserError(absl::StrCat("slot ", ctx.rank, " was not let in within ", timeout_s,
                                 " s (the workers let a joiner in at a round's end; is slot ", ctx.rank,
                                 " still training?): ", OneLine(e)));
  }
  if (answer.rfind("refused ", 0) == 0) throw UserError(absl::StrCat("slot ", ctx.rank, " refused: ", answer.substr(8)));
  // "gen G S,S,..."
  const std::vector<std::string> parts = absl::StrSplit(answer, ' ');
  int generation = 0;
  if (parts.size() != 3 || parts[0] != "gen" || !absl::SimpleAtoi(parts[1], &generation)) {
    throw std::logic_error("task8 membership: bad answer '" + answer + "'");
  }
  // Let in: from now on its slot's heartbeat is this process's (ConnectLate started none).
  dist::StartHeartbeat(ctx);
  return std::unique_ptr<Membership>(new Membership(ctx, generation, ParseSlots(parts[2])));
}

std::vector<int> Membership::Admit(const std::string& fingerprint) {
  std::vector<int64_t> admitted;  // slot 0: the tickets it lets in
  const std::string decision = Decided(Key(absl::StrCat("gen/", generation_, "/admit/", admits_++)), [&] {
    c10d::Store& store = *ctx_.store;
    std::vector<int> next = slots_;
    const int64_t tickets = store.add(Key("tickets"), 0);
    for (int64_t t = tickets_seen_ + 1; t <= tickets; ++t) {
      if (!store.check({TicketKey(t)})) break;  // still being written: the next round's
      if (store.check({AnswerKey(t)})) {        // withdrawn
        tickets_seen_ = t;
        continue;
      }
      const std::string request = Text(store.get(TicketKey(t)));
      const size_t nl = request.find('\n');
      int joiner = -1;
      absl::SimpleAtoi(request.substr(0, nl), &joiner);
      const std::string difference =
          FingerprintDifference(fingerprint, nl == std::string::npos ? "" : request.substr(nl + 1));
      std::string refusal;
      if (joiner == 0) {
        refusal = "slot 0 hosts the store and cannot be taken by a joiner";
      } else if (joiner < 0 || joiner >= ctx_.world_size) {
        refusal = absl::StrCat("slot ", joiner, " is not one of this job's slots 0..", ctx_.world_size - 1,
                               " (--world_size=", ctx_.world_size, ")");
      } else if (!difference.empty()) {
        refusal = "it is not the model the workers train: " + difference;
      } else if (std::find(next.begin(), next.end(), joiner) != next.end()) {
        break;  // its slot still trains (it may have just left): wait for the next round's end
      }
      tickets_seen_ = t;
      if (!refusal.empty()) {
        store.set(AnswerKey(t), Bytes("refused " + refusal));
        continue;
      }
      next.push_back(joiner);
      admitted.push_back(t);
    }
    if (admitted.empty()) return std::string("same");
    std::sort(next.begin(), next.end());
    for (int64_t t : admitted) {
      store.set(AnswerKey(t), Bytes(absl::StrCat("gen ", generation_ + 1, " ", SlotList(next))));
    }
    store.set(Key("current"), Bytes(absl::StrCat(generation_ + 1, " ", SlotList(next))));
    return "next " + SlotList(next);
  });
  if (decision == "same") return {};
  const std::vector<int> next = ParseSlots(decision.substr(5));
  std::vector<int> joined;
  for (int s : next) {
    if (std::find(slots_.begin(), slots_.end(), s) == slots_.end()) joined.push_back(s);
  }
  Enter(generation_ + 1, next);
  return joined;
}

void Membership::Finish() {
  const std::string key = Key(absl::StrCat("gen/", generation_, "/finished"));
  try {
    if (slot() != 0) {
      ctx_.store->add(key, 1);
      return;
    }
    const auto deadline = Clock::now() + Millis(ctx_.config.timeout_s);
    while (ctx_.store->add(key, 0) < size() - 1 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception& e) {
    StoreGone(ctx_, e);
  }
}

std::vector<int> Membership::Regroup() {
  const std::string base = Key(absl::StrCat("gen/", generation_, "/"));
  try {
    ctx_.store->set(base + absl::StrCat("alive/", slot()), Bytes("1"));
  } catch (const std::exception& e) {
    StoreGone(ctx_, e);
  }
  const std::string decision = Decided(base + "regroup", [&] {
    c10d::Store& store = *ctx_.store;
    // Every worker of the generation either says it is alive or lets its heartbeat stop; one
    // still inside a collective arrives by Gloo's deadline, while it beats.
    std::map<int, std::pair<int64_t, Clock::time_point>> beats;  // slot: last count, when it moved
    std::vector<int> alive, lost;
    const auto deadline = Clock::now() + Millis(ctx_.config.timeout_s) + std::chrono::seconds(10);
    std::vector<int> waiting = slots_;
    while (!waiting.empty()) {
      std::vector<int> still;
      for (int s : waiting) {
        if (store.check({base + absl::StrCat("alive/", s)})) {
          alive.push_back(s);
          continue;
        }
        const int64_t count = dist::HeartbeatCount(store, s);
        auto [it, fresh] = beats.try_emplace(s, count, Clock::now());
        if (!fresh && count != it->second.first) it->second = {count, Clock::now()};
        if (Clock::now() - it->second.second > kLostWindow || Clock::now() > deadline) {
          lost.push_back(s);
        } else {
          still.push_back(s);
        }
      }
      waiting = still;
      if (!waiting.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::sort(alive.begin(), alive.end());
    store.set(Key("current"), Bytes(absl::StrCat(generation_ + 1, " ", SlotList(alive))));
    return "next " + SlotList(alive);
  });
  const std::vector<int> next = ParseSlots(decision.substr(5));
  if (std::find(next.begin(), next.end(), slot()) == next.end()) {
    throw UserError(absl::StrCat("slot ", slot(), " was counted lost by the others (it came back after its heartbeat "
                                 "stopped for ", kLostWindow.count(), " s); start it again to join"));
  }
  std::vector<int> lost;
  for (int s : slots_) {
    if (std::find(next.begin(), next.end(), s) == next.end()) lost.push_back(s);
  }
  Enter(generation_ + 1, next);
  return lost;
}

void ShareTensors(c10d::ProcessGroup& pg, std::vector<torch::Tensor>& tensors) {
  // The layout first (how many, each one's dtype and shape), then the tensors.
  std::vector<int64_t> layout;
  if (pg.getRank() == 0) {
    layout.push_back(static_cast<int64_t>(tensors.size()));
    for (const auto& t : tensors) {
      if (t.scalar_type() != torch::kFloat && t.scalar_type() != torch::kLong) {
        throw std::invalid_argument("ShareTensors: float32 or int64 tensors only");
      }
      layout.push_back(t.scalar_type() == torch::kFloat ? 0 : 1);
      layout.push_back(t.dim());
      for (int64_t d : t.sizes()) layout.push_back(d);
    }
  }
  std::vector<torch::Tensor> length = {torch::tensor({static_cast<int64_t>(layout.size())}, torch::kLong)};
  pg.broadcast(length)->wait();
  std::vector<torch::Tensor> header = {pg.getRank() == 0 ? torch::tensor(layout, torch::kLong)
                                                          : torch::empty({length[0].item<int64_t>()}, torch::kLong)};
  pg.broadcast(header)->wait();
  if (pg.getRank() != 0) {
    const auto h = header[0];
    const int64_t* p = h.data_ptr<int64_t>();
    tensors.clear();
    const int64_t count = *p++;
    for (int64_t i = 0; i < count; ++i) {
      const auto dtype = *p++ == 0 ? torch::kFloat : torch::kLong;
      const int64_t dim = *p++;
      std::vector<int64_t> shape(p, p + dim);
      p += dim;
      tensors.push_back(torch::empty(shape, dtype));
    }
  }
  // One broadcast per dtype, not per tensor: across a slow link each broadcast costs round trips,
  // and a model's state is a hundred tensors.
  for (const auto dtype : {torch::kFloat, torch::kLong}) {
    std::vector<torch::Tensor> flat_parts;
    std::vector<torch::Tensor*> of_dtype;
    for (auto& t : tensors) {
      if (t.scalar_type() != dtype) continue;
      of_dtype.push_back(&t);
      flat_parts.push_back(t.reshape(-1));
    }
    if (of_dtype.empty()) continue;
    std::vector<torch::Tensor> flat = {torch::cat(flat_parts)};
    pg.broadcast(flat)->wait();
    if (pg.getRank() == 0) continue;
    int64_t at = 0;
    for (torch::Tensor* t : of_dtype) {
      t->copy_(flat[0].narrow(0, at, t->numel()).view(t->sizes()));
      at += t->numel();
    }
  }
}

}  // namespace distlm::task8
