#include "task6/fsdp_unit.h"

#include <chrono>
#include <map>
#include <memory>
#include <set>

#include <c10/core/StorageImpl.h>
#include <torch/utils.h>

#include "common/runtime/elapsed.h"
#include "common/runtime/errors.h"
#include "common/zero/shard_ops.h"

namespace distlm::task6 {
namespace {

std::vector<int64_t> Numels(const std::string& unit, const NamedTensors& params) {
  std::vector<int64_t> out;
  for (const auto& [name, p] : params) {
    if (p.scalar_type() != torch::kFloat) throw UserError("task6: parameter " + name + " of " + unit + " is not float32");
    out.push_back(p.numel());
  }
  return out;
}

}  // namespace

void AllocateStorage(const torch::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  const size_t need = static_cast<size_t>(t.storage_offset() + t.numel()) * t.element_size();
  if (s->nbytes() >= need) return;
  s->set_data_ptr_noswap(s->allocator()->allocate(need));
  s->set_nbytes(need);
}

void ReleaseStorage(const torch::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));  // the old DataPtr's deleter frees the bytes
  s->set_nbytes(0);
}

int64_t StorageBytes(const torch::Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t.storage().nbytes()) : 0;
}

FsdpUnit::FsdpUnit(std::string name, NamedTensors params, int rank, int world_size)
    : name_(std::move(name)), params_(std::move(params)), layout_(Numels(name_, params_), world_size), rank_(rank) {
  if (params_.empty()) throw UserError("task6: " + name_ + " has no parameters");
  const torch::Device device = params_.front().second.device();
  for (const auto& [pname, p] : params_) {
    if (p.device() != device) {
      throw UserError("task6: " + pname + " is on " + p.device().str() + ", " + params_.front().first + " on " +
                      device.str() + "; put the whole model on one device");
    }
  }
  torch::NoGradGuard no_grad;
  const auto on_device = torch::TensorOptions().dtype(torch::kFloat).device(device);
  full_params_ = torch::zeros({layout_.padded_numel()}, on_device);
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i].second;
    torch::Tensor data = full_params_.narrow(0, layout_.offset(i), layout_.numel(i));
    data.copy_(p.detach().reshape({-1}));
    // The parameter stays the same object (the model holds it) and moves onto the flat
    // storage; set_data keeps its own version counter, so writing the buffer is not an
    // in-place change autograd would object to.
    p.set_data(data.view(p.sizes()));
    p.mutable_grad() = torch::Tensor();
  }
  param_shard_ = full_params_.narrow(0, layout_.shard_begin(rank_), layout_.shard_numel()).clone();
  grad_shard_ = torch::zeros({layout_.shard_numel()}, on_device);
  ReleaseStorage(full_params_);
}

void FsdpUnit::AllocateGrad() {
  torch::NoGradGuard no_grad;
  full_grad_ = torch::zeros({layout_.padded_numel()}, full_params_.options());
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i].second;
    p.mutable_grad() = full_grad_.narrow(0, layout_.offset(i), layout_.numel(i)).view(p.sizes());
  }
}

void FsdpUnit::FreeGrad() {
  for (auto& [pname, p] : params_) p.mutable_grad() = torch::Tensor();
  full_grad_ = torch::Tensor();
}

int64_t FsdpUnit::HeldBytes() const {
  return StorageBytes(full_params_) + StorageBytes(full_grad_) + StorageBytes(param_shard_) + StorageBytes(grad_shard_);
}

FsdpModel::FsdpModel(const std::vector<model::Unit>& units, const NamedTensors& params, train::AdamWOptions options,
                     int rank, int world_size)
    : rank_(rank), world_size_(world_size) {
  if (rank < 0 || rank >= world_size) {
    throw UserError("task6: rank " + std::to_string(rank) + " outside world size " + std::to_string(world_size));
  }
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < params.size(); ++i) index[params[i].first] = i;
  num_params_ = params.size();
  // Every check before any unit takes its parameters: an error leaves the model as it was.
  std::set<std::string> seen;
  std::vector<NamedTensors> per_unit;
  for (const model::Unit& u : units) {
    NamedTensors mine;
    int64_t numel = 0;
    for (const std::string& name : u.parameters) {
      auto it = index.find(name);
      if (it == index.end()) throw UserError("task6: unit " + u.name + " names " + name + ", which the model lacks");
      if (!seen.insert(name).second) throw UserError("task6: parameter " + name + " is in two units");
      mine.push_back(params[it->second]);
      registration_index_.push_back(it->second);
      numel += params[it->second].second.numel();
    }
    if (numel < world_size) {
      throw UserError("task6: unit " + u.name + " has " + std::to_string(numel) + " elements, fewer than the " +
                      std::to_string(world_size) + " ranks: every rank's shard would be padding");
    }
    per_unit.push_back(std::move(mine));
  }
  if (seen.size() != params.size()) {
    for (const auto& [name, p] : params) {
      if (!seen.count(name)) throw UserError("task6: parameter " + name + " is in no unit of the model");
    }
  }
  for (size_t u = 0; u < units.size(); ++u) units_.emplace_back(units[u].name, std::move(per_unit[u]), rank, world_size);
  // AdamW over the shards' pieces of each parameter, named as the parameter: weight decay skips
  // biases and LayerNorm weights as for the whole model.
  NamedTensors pieces;
  for (FsdpUnit& unit : units_) {
    first_piece_.push_back(pieces.size());
    const int64_t begin = unit.layout().shard_begin(rank);
    for (const zero::Segment& s : unit.layout().Segments(rank)) {
      torch::Tensor piece = unit.param_shard().narrow(0, s.flat_begin - begin, s.numel);
      piece.mutable_grad() = unit.grad_shard().narrow(0, s.flat_begin - begin, s.numel);
      pieces.emplace_back(unit.params()[s.param].first, piece);
    }
  }
  adam_ = std::make_unique<train::BertAdamW>(std::move(pieces), options);
}

double FsdpModel::ShardSquaredNorm() const {
  double sum = 0;
  for (const FsdpUnit& u : units_) sum += zero::SquaredNormInDouble(u.grad_shard());
  return sum;
}

void FsdpModel::ScaleGradShards(double norm, double max_norm) {
  std::vector<torch::Tensor> shards;
  for (FsdpUnit& u : units_) shards.push_back(u.grad_shard());
  zero::ScaleForClipping(shards, norm, max_norm);
}

void FsdpModel::StepShards() {
  const auto start = std::chrono::steady_clock::now();
  adam_->Step();
  last_step_ms_ = MsSince(start);
}

void FsdpModel::ZeroGradShards() {
  torch::NoGradGuard no_grad;
  for (FsdpUnit& u : units_) u.grad_shard().zero_();
}

train::OptimizerState FsdpModel::GatherState(c10d::ProcessGroup& pg) {
  const train::OptimizerState& mine = adam_->state();
  train::OptimizerState whole;
  whole.step = adam_->step_count();
  whole.exp_avg.resize(num_params_);
  whole.exp_avg_sq.resize(num_params_);
  size_t k = 0;  // the unit's first parameter, in unit order
  for (size_t u = 0; u < units_.size(); ++u) {
    const FsdpUnit& unit = units_[u];
    std::vector<std::vector<int64_t>> shapes;
    for (const auto& [name, p] : unit.params()) shapes.push_back(p.sizes().vec());
    const size_t first = first_piece_[u];
    const size_t count = unit.layout().Segments(rank_).size();
    for (int moment = 0; moment < 2; ++moment) {
      const auto& all = moment == 0 ? mine.exp_avg : mine.exp_avg_sq;
      std::vector<torch::Tensor> pieces(all.begin() + first, all.begin() + first + count);
      std::vector<torch::Tensor> got = zero::GatherWhole(pg, unit.layout(), rank_, pieces, shapes);
      auto& out = moment == 0 ? whole.exp_avg : whole.exp_avg_sq;
      for (size_t i = 0; i < got.size(); ++i) out[registration_index_[k + i]] = got[i];
    }
    k += unit.params().size();
  }
  return whole;
}

void FsdpModel::LoadState(const train::OptimizerState& whole) {
  if (whole.exp_avg.size() != num_params_ || whole.exp_avg_sq.size() != num_params_) {
    throw UserError("task6: optimizer state has " + std::to_string(whole.exp_avg.size()) + " tensors, the model has " +
                    std::to_string(num_params_) + " parameters");
  }
  train::OptimizerState mine;
  mine.step = whole.step;
  size_t k = 0;
  for (const FsdpUnit& unit : units_) {
    std::vector<std::string> names;
    std::vector<torch::Tensor> avg, sq;
    for (size_t i = 0; i < unit.params().size(); ++i) {
      names.push_back(unit.params()[i].first);
      avg.push_back(whole.exp_avg[registration_index_[k + i]]);
      sq.push_back(whole.exp_avg_sq[registration_index_[k + i]]);
    }
    for (const torch::Tensor& t : zero::ShardPieces(unit.layout(), rank_, avg, names)) mine.exp_avg.push_back(t);
    for (const torch::Tensor& t : zero::ShardPieces(unit.layout(), rank_, sq, names)) mine.exp_avg_sq.push_back(t);
    k += unit.params().size();
  }
  adam_->LoadState(mine);
}

nlohmann::json FsdpModel::ShardLayout() const {
  nlohmann::json units = nlohmann::json::array();
  for (const FsdpUnit& unit : units_) {
    nlohmann::json params = nlohmann::json::array();
    for (size_t i = 0; i < unit.params().size(); ++i) {
      params.push_back({{"name", unit.params()[i].first},
                        {"offset", unit.layout().offset(i)},
                        {"shape", unit.params()[i].second.sizes().vec()}});
    }
    units.push_back({{"name", unit.name()}, {"shard_numel", unit.shard_numel()}, {"params", params}});
  }
  return {{"units", units}};
}

namespace {

// The moments of a unit's pieces (AdamW's, in piece order) laid into one block of the shard
// (padding zero), or the block's values back into them.
torch::Tensor MomentBlock(const FsdpUnit& unit, int rank, const std::vector<torch::Tensor>& pieces) {
  torch::Tensor block = torch::zeros({unit.shard_numel()}, unit.param_shard().options());
  const auto segments = unit.layout().Segments(rank);
  const int64_t begin = unit.layout().shard_begin(rank);
  for (size_t i = 0; i < segments.size(); ++i) {
    block.narrow(0, segments[i].flat_begin - begin, segments[i].numel).copy_(pieces[i].reshape({-1}));
  }
  return block;
}

}  // namespace

NamedTensors FsdpModel::SaveShards() const {
  torch::NoGradGuard no_grad;
  const train::OptimizerState& state = adam_->state();
  NamedTensors part;
  for (size_t u = 0; u < units_.size(); ++u) {
    const FsdpUnit& unit = units_[u];
    const size_t first = first_piece_[u], count = unit.layout().Segments(rank_).size();
    const std::vector<torch::Tensor> avg(state.exp_avg.begin() + first, state.exp_avg.begin() + first + count);
    const std::vector<torch::Tensor> sq(state.exp_avg_sq.begin() + first, state.exp_avg_sq.begin() + first + count);
    const std::string key = "unit" + std::to_string(u) + "/";
    part.emplace_back(key + "param", unit.param_shard().clone());
    part.emplace_back(key + "exp_avg", MomentBlock(unit, rank_, avg));
    part.emplace_back(key + "exp_avg_sq", MomentBlock(unit, rank_, sq));
  }
  return part;
}

void FsdpModel::LoadShards(const NamedTensors& part, int64_t step) {
  std::map<std::string, torch::Tensor> by_name(part.begin(), part.end());
  auto block = [&](size_t u, const std::string& kind) {
    const std::string key = "unit" + std::to_string(u) + "/" + kind;
    auto it = by_name.find(key);
    if (it == by_name.end() || it->second.numel() != units_[u].shard_numel()) {
      throw UserError("task6: the snapshot's part has no " + key + " of " + std::to_string(units_[u].shard_numel()) +
                      " elements");
    }
    return it->second.to(units_[u].param_shard().device(), torch::kFloat).reshape({-1});
  };
  torch::NoGradGuard no_grad;
  train::OptimizerState mine;
  mine.step = step;
  for (size_t u = 0; u < units_.size(); ++u) {
    FsdpUnit& unit = units_[u];
    unit.param_shard().copy_(block(u, "param"));
    const torch::Tensor avg = block(u, "exp_avg"), sq = block(u, "exp_avg_sq");
    const int64_t begin = unit.layout().shard_begin(rank_);
    for (const zero::Segment& s : unit.layout().Segments(rank_)) {
      mine.exp_avg.push_back(avg.narrow(0, s.flat_begin - begin, s.numel));
      mine.exp_avg_sq.push_back(sq.narrow(0, s.flat_begin - begin, s.numel));
    }
  }
  adam_->LoadState(mine);  // copies into the live moments (their shapes: the pieces', flat)
}

int64_t FsdpModel::ParamBytesHeld() const {
  int64_t sum = 0;
  for (const FsdpUnit& u : units_) {
    sum += StorageBytes(u.full_params()) + StorageBytes(u.param_shard());
  }
  return sum;
}

int64_t FsdpModel::GradBytesHeld() const {
  int64_t sum = 0;
  for (const FsdpUnit& u : units_) {
    sum += StorageBytes(u.full_grad()) + StorageBytes(u.grad_shard());
  }
  return sum;
}

int64_t FsdpModel::TotalNumel() const {
  int64_t n = 0;
  for (const FsdpUnit& u : units_) n += u.layout().total_numel();
  return n;
}

}  // namespace distlm::task6
