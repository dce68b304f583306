#include "grading/final_weights.h"

#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <stdexcept>
#include <vector>

#include "common/safetensors/header.h"
#include "grading/trace.h"

namespace distlm::grading {
namespace {

constexpr size_t kMaxModelBytes = 256 << 20;

// A model file's float32 tensors by name (copied out: a file may put them anywhere); throws
// (UserError) on a malformed file.
struct Model {
  std::map<std::string, std::vector<float>> f32;
};

Model Parse(const std::string& bytes, const std::string& source) {
  Model m;
  const safetensors::FileParts parts = safetensors::SplitFile(bytes, source);
  const safetensors::Header header = safetensors::ParseHeader(parts.header_json, parts.data.size(), source);
  for (const auto& t : header.tensors) {
    if (t.dtype != "F32") continue;
    std::vector<float>& v = m.f32[t.name];
    v.resize((t.end - t.begin) / sizeof(float));
    if (!v.empty()) std::memcpy(v.data(), parts.data.data() + t.begin, v.size() * sizeof(float));
  }
  return m;
}

// ||got - want|| / ||want|| over every float32 tensor of `want`; false (and the tensor in
// `missing`) where `got` lacks one of its shape.
bool RelativeL2(const Model& got, const Model& want, double* rel, std::string* missing) {
  double diff2 = 0, norm2 = 0;
  for (const auto& [tensor, w] : want.f32) {
    const auto it = got.f32.find(tensor);
    if (it == got.f32.end() || it->second.size() != w.size()) {
      *missing = tensor;
      return false;
    }
    for (size_t i = 0; i < w.size(); ++i) {
      const double a = it->second[i], b = w[i];
      diff2 += (a - b) * (a - b);
      norm2 += b * b;
    }
  }
  *rel = norm2 > 0 ? std::sqrt(diff2 / norm2) : std::sqrt(diff2);
  return true;
}

}  // namespace

void WeightsVerdict::Judge(TestResult* parity) const {
  if (!checked) return;
  if (ok) {
    parity->output += message + "\n";
  } else if (parity->passed) {
    parity->passed = false;
    parity->score = 0;
    parity->output = message + ".\n\n" + parity->output;
  } else {
    parity->output += "also: " + message + "\n";
  }
}

WeightsVerdict CheckFinalWeights(const StageRun& run, int ranks, const std::string& grader_model,
                                 const std::string& yardstick) {
  WeightsVerdict v;
  if (ranks < 2 || grader_model.empty()) return v;
  v.checked = true;
  try {
    const Model want = Parse(grader_model, "the grader's model.safetensors");
    std::vector<Model> got;
    for (int r = 0; r < ranks; ++r) {
      const std::string name = r == 0 ? "model.safetensors" : "rank_" + std::to_string(r) + "/model.safetensors";
      std::string bytes, why;
      if (!run.ReadOutput(name, kMaxModelBytes, &bytes, &why)) {
        v.ok = false;
        v.message = "rank " + std::to_string(r) + "'s final weights could not be read (" + why +
                    "): every rank must end the run and save its model";
        return v;
      }
      got.push_back(Parse(bytes, "rank " + std::to_string(r) + "'s " + name));
    }
    // Every rank the same as rank 0, bit for bit.
    for (int r = 1; r < ranks; ++r) {
      for (const auto& [tensor, data] : got[0].f32) {
        const auto it = got[r].f32.find(tensor);
        if (it == got[r].f32.end() || it->second.size() != data.size() ||
            std::memcmp(it->second.data(), data.data(), data.size() * sizeof(float)) != 0) {
          v.ok = false;
          v.message = "your ranks end with different weights: rank " + std::to_string(r) + "'s " + tensor +
                      " differs from rank 0's. After every update all ranks must hold the same parameters (each "
                      "must apply the same averaged gradient)";
          return v;
        }
      }
    }
    // Rank 0 against the grader's run: one relative L2 distance over every tensor.
    std::string missing;
    if (!RelativeL2(got[0], want, &v.rel_diff, &missing)) {
      v.ok = false;
      v.message = "rank 0's final model has no tensor " + missing + " of the grader's shape";
      return v;
    }
    if (!(v.rel_diff <= kWeightsTol)) {
      v.ok = false;
      v.message = "the final weights (identical on every rank) are " + Fmt("%.1e", v.rel_diff) +
                  " (relative L2) away from those of " + yardstick + ", more than " + Fmt("%.0e", kWeightsTol);
      return v;
    }
    v.message = "final weights: identical on all " + std::to_string(ranks) + " ranks, " + Fmt("%.1e", v.rel_diff) +
                " (relative L2) from " + yardstick;
  } catch (const std::exception& e) {
    v.ok = false;
    v.message = std::string("a final model file is not a valid safetensors file: ") + e.what();
  }
  return v;
}

bool RankZeroMatches(const StageRun& run, const std::string& model) {
  std::string bytes, why, missing;
  if (model.empty() || !run.ReadOutput("model.safetensors", kMaxModelBytes, &bytes, &why)) return false;
  try {
    double rel = 0;
    return RelativeL2(Parse(bytes, "rank 0's model.safetensors"), Parse(model, "the model"), &rel, &missing) &&
           rel <= kWeightsTol;
  } catch (const std::exception&) {
    return false;
  }
}

bool MovedAlong(const StageRun& run, const std::string& start, const std::string& mean, double* along,
                std::string* why) {
  std::string bytes;
  if (!run.ReadOutput("model.safetensors", kMaxModelBytes, &bytes, why)) return false;
  try {
    const Model got = Parse(bytes, "rank 0's model.safetensors"), from = Parse(start, "the round's start"),
                to = Parse(mean, "the workers' mean");
    double dot = 0, norm2 = 0;
    for (const auto& [tensor, s] : from.f32) {
      const auto g = got.f32.find(tensor), m = to.f32.find(tensor);
      if (g == got.f32.end() || m == to.f32.end() || g->second.size() != s.size() || m->second.size() != s.size()) {
        *why = "rank 0's final model has no tensor " + tensor + " of the grader's shape";
        return false;
      }
      for (size_t i = 0; i < s.size(); ++i) {
        const double way = static_cast<double>(m->second[i]) - s[i];
        dot += (static_cast<double>(g->second[i]) - s[i]) * way;
        norm2 += way * way;
      }
    }
    if (!(norm2 > 0)) {
      *why = "the workers did not move";
      return false;
    }
    *along = dot / norm2;
    return true;
  } catch (const std::exception& e) {
    *why = e.what();
    return false;
  }
}

std::string MeanOfModels(const std::vector<std::string>& models) {
  if (models.empty()) throw std::logic_error("MeanOfModels: no model");
  std::vector<Model> parsed;
  for (size_t i = 0; i < models.size(); ++i) parsed.push_back(Parse(models[i], "the grader's model " + std::to_string(i)));
  std::string out = models[0];
  const safetensors::FileParts parts = safetensors::SplitFile(out, "the grader's model 0");
  const size_t data_at = static_cast<size_t>(parts.data.data() - out.data());
  const safetensors::Header header = safetensors::ParseHeader(parts.header_json, parts.data.size(), "the grader's model 0");
  for (const auto& t : header.tensors) {
    if (t.dtype != "F32") continue;
    std::vector<double> sum(parsed[0].f32.at(t.name).size(), 0.0);
    for (const Model& m : parsed) {
      const auto it = m.f32.find(t.name);
      if (it == m.f32.end() || it->second.size() != sum.size()) {
        throw std::logic_error("MeanOfModels: the models differ in " + t.name);
      }
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += it->second[i];
    }
    std::vector<float> mean(sum.size());
    for (size_t i = 0; i < sum.size(); ++i) mean[i] = static_cast<float>(sum[i] / static_cast<double>(parsed.size()));
    if (!mean.empty()) std::memcpy(&out[data_at + t.begin], mean.data(), mean.size() * sizeof(float));
  }
  return out;
}

}  // namespace distlm::grading
