// CIFAR-10 from its binary release (cifar-10-batches-bin: data_batch_1.bin .. data_batch_5.bin,
// test_batch.bin), and the images made ready for a ViT: resized, normalised, and for training
// augmented (random crop after 4-pixel padding, horizontal flip) from a seed, so that every rank
// and every resume draws the same augmentation for the same example and epoch.
//
// A record is 3073 bytes: the label (0-9), then 1024 red, 1024 green and 1024 blue bytes, each
// plane 32 rows of 32 pixels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

namespace distlm::vision {

inline constexpr int64_t kCifarSide = 32;
inline constexpr int64_t kCifarRecordBytes = 1 + 3 * kCifarSide * kCifarSide;
extern const std::vector<std::string> kCifar10Classes;  // airplane, automobile, ..., truck

struct ImageSet {
  torch::Tensor images;  // uint8 [N, 3, 32, 32]
  torch::Tensor labels;  // int64 [N]
};

// Reads one binary file. A UserError names the file for a missing file, a size that is not a
// whole number of records, or a label outside 0-9 (with the record's index).
ImageSet ReadCifarFile(const std::string& path);

// "train": data_batch_1.bin .. data_batch_5.bin of `dir`, in that order; "test": test_batch.bin.
ImageSet LoadCifar10(const std::string& dir, const std::string& split);

struct Preprocess {
  int64_t image_size = 224;                   // the model's input side
  std::vector<double> mean = {0.5, 0.5, 0.5};  // transformers' ViTImageProcessor defaults
  std::vector<double> std = {0.5, 0.5, 0.5};
};

// Float [n, 3, image_size, image_size] for the images at `indices`: pixels / 255, bilinear
// resize (when image_size != 32), (x - mean) / std per channel. With `augment`, each image is
// first padded by 4 pixels (zeros) and cropped back to 32x32 at a random offset, and flipped left
// to right with probability 1/2; the draws depend only on (seed, epoch, index).
torch::Tensor MakeBatch(const ImageSet& set, const std::vector<int64_t>& indices, const Preprocess& pre, bool augment,
                        uint64_t seed, int64_t epoch);

// Accuracy, per-class accuracy and the confusion matrix (rows: true class, columns: predicted).
struct ClassificationMetrics {
  double accuracy = 0;
  std::vector<double> per_class_accuracy;  // NaN for a class with no examples
  std::vector<std::vector<int64_t>> confusion;
};
ClassificationMetrics Classify(const torch::Tensor& predictions, const torch::Tensor& labels, int64_t num_classes);

}  // namespace distlm::vision
