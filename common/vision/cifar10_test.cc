// CIFAR-10's binary format on files the test writes itself: byte order, the one-line errors,
// preprocessing, augmentation that depends only on (seed, epoch, index), and the metrics.
#include "common/vision/cifar10.h"

#include <cmath>

#include <gtest/gtest.h>

#include "common/runtime/errors.h"
#include "common/testing/subprocess.h"
#include "common/testing/user_error.h"

namespace distlm::vision {
namespace {

// Record i: label i % 10; pixel (c, y, x) = (i * 7 + c * 50 + y * 3 + x) % 256.
std::string Records(int first, int count) {
  std::string bytes;
  for (int i = first; i < first + count; ++i) {
    bytes.push_back(static_cast<char>(i % 10));
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) bytes.push_back(static_cast<char>((i * 7 + c * 50 + y * 3 + x) % 256));
  }
  return bytes;
}

TEST(Cifar10Test, ReadsRecordsPlaneByPlaneAndNamesBadFiles) {
  const std::string dir = distlm::testing::MakeTempDir("cifar");
  for (int b = 1; b <= 5; ++b) distlm::testing::WriteFileMakingDirs(dir + "/data_batch_" + std::to_string(b) + ".bin", Records((b - 1) * 3, 3));
  distlm::testing::WriteFileMakingDirs(dir + "/test_batch.bin", Records(100, 2));
  ImageSet train = LoadCifar10(dir, "train");
  ASSERT_EQ(train.images.sizes(), (std::vector<int64_t>{15, 3, 32, 32}));
  EXPECT_EQ(train.labels[13].item<int64_t>(), 3);
  EXPECT_EQ(train.images[13][2][5][9].item<uint8_t>(), (13 * 7 + 2 * 50 + 5 * 3 + 9) % 256);
  EXPECT_EQ(LoadCifar10(dir, "test").labels[1].item<int64_t>(), 1);

  distlm::testing::WriteFileMakingDirs(dir + "/short.bin", Records(0, 1).substr(0, 3000));
  EXPECT_EQ(::distlm::testing::UserErrorOf([&] { ReadCifarFile(dir + "/short.bin"); }),
            dir + "/short.bin: 3000 bytes is not a whole number of 3073-byte CIFAR-10 records");
  std::string bad = Records(0, 2);
  bad[3073] = 12;
  distlm::testing::WriteFileMakingDirs(dir + "/bad.bin", bad);
  EXPECT_EQ(::distlm::testing::UserErrorOf([&] { ReadCifarFile(dir + "/bad.bin"); }), dir + "/bad.bin: record 1 has label 12 (CIFAR-10's labels are 0-9)");
  EXPECT_EQ(::distlm::testing::UserErrorOf([&] { LoadCifar10(dir + "/none", "test"); }),
            dir + "/none/test_batch.bin: file not found (CIFAR-10's binary release, cifar-10-batches-bin)");
  EXPECT_EQ(::distlm::testing::UserErrorOf([&] { LoadCifar10(dir, "dev"); }), "CIFAR-10 split 'dev': use train or test");
}

TEST(Cifar10Test, PreprocessingAndSeededAugmentation) {
  const std::string dir = distlm::testing::MakeTempDir("cifar_aug");
  distlm::testing::WriteFileMakingDirs(dir + "/test_batch.bin", Records(0, 4));
  ImageSet set = LoadCifar10(dir, "test");
  Preprocess pre;
  pre.image_size = 32;
  torch::Tensor plain = MakeBatch(set, {2}, pre, false, 0, 0);
  const double pixel = (2 * 7 + 1 * 50 + 4 * 3 + 6) % 256;
  EXPECT_NEAR(plain[0][1][4][6].item<double>(), (pixel / 255.0 - 0.5) / 0.5, 1e-6);

  // Augmented: a 4-pixel zero padding (which normalises to -1), a 32x32 crop, maybe a flip.
  auto same = [](const torch::Tensor& a, const torch::Tensor& b) { return torch::equal(a, b); };
  torch::Tensor a = MakeBatch(set, {0, 1, 2, 3}, pre, true, 42, 1);
  EXPECT_TRUE(same(a, MakeBatch(set, {0, 1, 2, 3}, pre, true, 42, 1)));
  EXPECT_TRUE(same(a[2], MakeBatch(set, {2}, pre, true, 42, 1)[0])) << "an image's draw depends on its batch";
  EXPECT_FALSE(same(a, MakeBatch(set, {0, 1, 2, 3}, pre, true, 42, 2))) << "every epoch drew the same augmentation";
  for (int64_t b = 0; b < 4; ++b) {
    torch::Tensor padded = torch::constant_pad_nd(MakeBatch(set, {b}, pre, false, 0, 0)[0], {4, 4, 4, 4}, -1.0);
    bool found = false;
    for (int dy = 0; dy <= 8 && !found; ++dy)
      for (int dx = 0; dx <= 8 && !found; ++dx) {
        torch::Tensor crop = padded.slice(1, dy, dy + 32).slice(2, dx, dx + 32);
        found = same(crop, a[b]) || same(crop.flip({2}), a[b]);
      }
    EXPECT_TRUE(found) << "image " << b << " is not a padded crop (or its mirror) of the original";
  }
  pre.image_size = 64;
  EXPECT_EQ(MakeBatch(set, {0, 1}, pre, false, 0, 0).sizes(), (std::vector<int64_t>{2, 3, 64, 64}));
}

TEST(Cifar10Test, AccuracyPerClassAndConfusion) {
  ClassificationMetrics m = Classify(torch::tensor({0, 1, 1, 2}), torch::tensor({0, 1, 2, 2}), 4);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.75);
  EXPECT_DOUBLE_EQ(m.per_class_accuracy[2], 0.5);
  EXPECT_TRUE(std::isnan(m.per_class_accuracy[3]));
  EXPECT_EQ(m.confusion[2][1], 1);
  EXPECT_EQ(m.confusion[2][2], 1);
}

}  // namespace
}  // namespace distlm::vision
