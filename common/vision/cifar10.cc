#include "common/vision/cifar10.h"

#include <torch/nn/functional.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"

namespace distlm::vision {

const std::vector<std::string> kCifar10Classes = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                  "dog",      "frog",       "horse", "ship", "truck"};

namespace {

// SplitMix64: a counter hash, so a draw depends only on its inputs, not on how many came before.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

ImageSet ReadCifarFile(const std::string& path) {
  if (!PathExists(path)) throw UserError(path + ": file not found (CIFAR-10's binary release, cifar-10-batches-bin)");
  const std::string bytes = ReadFile(path);
  if (bytes.empty() || bytes.size() % kCifarRecordBytes != 0) {
    throw UserError(path + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of " +
                    std::to_string(kCifarRecordBytes) + "-byte CIFAR-10 records");
  }
  const int64_t n = static_cast<int64_t>(bytes.size()) / kCifarRecordBytes;
  ImageSet set;
  set.images = torch::empty({n, 3, kCifarSide, kCifarSide}, torch::kUInt8);
  set.labels = torch::empty({n}, torch::kLong);
  uint8_t* img = set.images.data_ptr<uint8_t>();
  int64_t* lab = set.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const auto* rec = reinterpret_cast<const uint8_t*>(bytes.data()) + i * kCifarRecordBytes;
    if (rec[0] > 9) {
      throw UserError(path + ": record " + std::to_string(i) + " has label " + std::to_string(rec[0]) +
                      " (CIFAR-10's labels are 0-9)");
    }
    lab[i] = rec[0];
    std::copy(rec + 1, rec + kCifarRecordBytes, img + i * (kCifarRecordBytes - 1));
  }
  return set;
}

ImageSet LoadCifar10(const std::string& dir, const std::string& split) {
  std::vector<std::string> files;
  if (split == "train") {
    for (int b = 1; b <= 5; ++b) files.push_back(dir + "/data_batch_" + std::to_string(b) + ".bin");
  } else if (split == "test") {
    files.push_back(dir + "/test_batch.bin");
  } else {
    throw UserError("CIFAR-10 split '" + split + "': use train or test");
  }
  std::vector<torch::Tensor> images, labels;
  for (const auto& f : files) {
    ImageSet part = ReadCifarFile(f);
    images.push_back(part.images);
    labels.push_back(part.labels);
  }
  return {torch::cat(images), torch::cat(labels)};
}

torch::Tensor MakeBatch(const ImageSet& set, const std::vector<int64_t>& indices, const Preprocess& pre, bool augment,
                        uint64_t seed, int64_t epoch) {
  if (pre.mean.size() != 3 || pre.std.size() != 3) throw UserError("image normalisation needs 3 means and 3 stds");
  const int64_t n = static_cast<int64_t>(indices.size());
  torch::Tensor x = torch::empty({n, 3, kCifarSide, kCifarSide}, torch::kFloat);
  for (int64_t b = 0; b < n; ++b) {
    const int64_t i = indices[b];
    if (i < 0 || i >= set.images.size(0)) throw UserError("image index " + std::to_string(i) + " is out of range");
    torch::Tensor img = set.images[i].to(torch::kFloat).div_(255.0);
    if (augment) {
      const uint64_t h = Mix(Mix(Mix(seed) ^ static_cast<uint64_t>(epoch)) ^ static_cast<uint64_t>(i));
      const int64_t dy = static_cast<int64_t>(h % 9), dx = static_cast<int64_t>((h >> 8) % 9);
      const bool flip = (h >> 16) & 1;
      img = torch::constant_pad_nd(img, {4, 4, 4, 4}, 0.0).slice(1, dy, dy + kCifarSide).slice(2, dx, dx + kCifarSide);
      if (flip) img = img.flip({2});
    }
    x[b].copy_(img);
  }
  if (pre.image_size != kCifarSide) {
    x = torch::nn::functional::interpolate(x, torch::nn::functional::InterpolateFuncOptions()
                                                  .size(std::vector<int64_t>{pre.image_size, pre.image_size})
                                                  .mode(torch::kBilinear)
                                                  .align_corners(false));
  }
  auto mean = torch::tensor(pre.mean, torch::kFloat).view({1, 3, 1, 1});
  auto std = torch::tensor(pre.std, torch::kFloat).view({1, 3, 1, 1});
  return (x - mean) / std;
}

ClassificationMetrics Classify(const torch::Tensor& predictions, const torch::Tensor& labels, int64_t num_classes) {
  ClassificationMetrics m;
  m.confusion.assign(num_classes, std::vector<int64_t>(num_classes, 0));
  auto p = predictions.to(torch::kLong).contiguous(), l = labels.to(torch::kLong).contiguous();
  const int64_t n = l.numel();
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = l.data_ptr<int64_t>()[i], q = p.data_ptr<int64_t>()[i];
    if (t < 0 || t >= num_classes || q < 0 || q >= num_classes) throw UserError("a class index is out of range");
    ++m.confusion[t][q];
    correct += t == q;
  }
  m.accuracy = n ? static_cast<double>(correct) / n : 0.0;
  for (int64_t c = 0; c < num_classes; ++c) {
    int64_t total = 0;
    for (int64_t v : m.confusion[c]) total += v;
    m.per_class_accuracy.push_back(total ? static_cast<double>(m.confusion[c][c]) / total
                                         : std::numeric_limits<double>::quiet_NaN());
  }
  return m;
}

}  // namespace distlm::vision
