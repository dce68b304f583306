// A model's units: the pieces its forward runs one after another (BERT and the ViT: the
// embeddings, each encoder layer, then the head), which a stage may wrap without touching the
// model code. Fully sharded data parallel (task 6) gathers a unit's parameters just before its
// forward and frees them after it, and hooks the unit's output so that it gathers them again
// just before the unit's backward; a pipeline cuts the model between units. The model calls
// RunUnit around each unit; with no hooks set, RunUnit is the unit's forward and nothing else.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>
#include <torch/nn/module.h>

#include "common/trace/recorder.h"

namespace distlm::model {

// One unit, in forward order: a name for messages ("embeddings", "layer 3", "head") and the
// names of its parameters as the model's named_parameters() gives them (every parameter of the
// model is in exactly one unit).
struct Unit {
  std::string name;
  std::vector<std::string> parameters;
};

struct UnitHooks {
  // Just before unit u's forward: its parameters must hold their values when this returns.
  std::function<void(int u)> before_forward;
  // Just after unit u's forward, with its output: returns what the model goes on with (the
  // output itself, or the output with an autograd hook registered on it: the gradient arriving
  // there is the moment just before this unit's backward).
  std::function<torch::Tensor(int u, torch::Tensor output)> after_forward;
};

// `run` (the unit's forward, returning its output) as unit u of a model whose hooks are
// `hooks` (null: none set). Under --trace (a recorder active) the unit's forward and the hooks'
// time are spans of their own, and the moment its output's gradient arrives (the start of the
// unit's backward) is marked: the trace then shows forward and backward unit by unit.
template <typename Run>
torch::Tensor RunUnit(const UnitHooks* hooks, int u, Run&& run) {
  trace::Recorder* recorder = trace::Recorder::Active();
  if (recorder == nullptr) {
    // Not tracing (task 6's every unit, every update): no span names to build.
    if (hooks == nullptr) return run();
    if (hooks->before_forward) hooks->before_forward(u);
    torch::Tensor out = run();
    return hooks->after_forward ? hooks->after_forward(u, std::move(out)) : out;
  }
  const std::string unit = "unit " + std::to_string(u);
  if (hooks != nullptr && hooks->before_forward) {
    trace::Scope span(trace::cat::kUnitHook, "before forward, " + unit);
    hooks->before_forward(u);
  }
  torch::Tensor out;
  {
    trace::Scope span(trace::cat::kForward, "forward, " + unit);
    out = run();
  }
  if (out.requires_grad()) {
    out.register_hook([recorder, u](const torch::Tensor&) { recorder->MarkUnitBackward(u, trace::NowNs()); });
  }
  if (hooks == nullptr || !hooks->after_forward) return out;
  trace::Scope span(trace::cat::kUnitHook, "after forward, " + unit);
  return hooks->after_forward(u, std::move(out));
}

// The units of a model from its parameters' names (registration order) and, per unit in
// forward order, the name prefixes of its parameters; std::logic_error naming the parameter
// when one falls in no unit or in two.
inline std::vector<Unit> UnitsByPrefix(const std::vector<std::string>& names,
                                       const std::vector<std::pair<std::string, std::vector<std::string>>>& prefixes) {
  std::vector<Unit> units;
  for (const auto& [unit, unused] : prefixes) units.push_back({unit, {}});
  for (const std::string& name : names) {
    int found = -1;
    for (size_t u = 0; u < prefixes.size(); ++u) {
      for (const std::string& prefix : prefixes[u].second) {
        if (name.rfind(prefix, 0) != 0) continue;
        if (found >= 0 && found != static_cast<int>(u)) {
          throw std::logic_error("parameter " + name + " is in two units: " + units[found].name + " and " + units[u].name);
        }
        found = static_cast<int>(u);
      }
    }
    if (found < 0) throw std::logic_error("parameter " + name + " is in no unit of the model");
    units[found].parameters.push_back(name);
  }
  return units;
}

// The units of an encoder model (BERT, the ViT): the embeddings (parameters named
// `embeddings`...), layer i for i < layers (`layer` + i + "."...), then the head (any of `head`).
inline std::vector<Unit> EncoderUnits(const torch::nn::Module& m, const std::string& embeddings,
                                      const std::string& layer, int64_t layers, const std::vector<std::string>& head) {
  std::vector<std::string> names;
  for (const auto& p : m.named_parameters()) names.push_back(p.key());
  std::vector<std::pair<std::string, std::vector<std::string>>> prefixes = {{"embeddings", {embeddings}}};
  for (int64_t i = 0; i < layers; ++i) prefixes.push_back({"layer " + std::to_string(i), {layer + std::to_string(i) + "."}});
  prefixes.push_back({"head", head});
  return UnitsByPrefix(names, prefixes);
}

}  // namespace distlm::model
