// Writes a small data set in CIFAR-10's binary format (data_batch_1.bin .. data_batch_5.bin,
// test_batch.bin) that a model can learn: each class has its own colour and a stripe at its own
// position, with pixel noise. For tests, the default ViT run and trying the pipeline without the
// real data (bazel run //tools/download fetches that).
//
//   bazel run //common/vision:make_sample_cifar10 -- --out=DIR [--train_per_class=8] [--test_per_class=2]
#include <cstdio>
#include <random>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/vision/cifar10.h"

ABSL_FLAG(std::string, out, "", "folder to write the six .bin files into");
ABSL_FLAG(int, train_per_class, 8, "training images per class (spread over the 5 training files)");
ABSL_FLAG(int, test_per_class, 2, "test images per class");
ABSL_FLAG(int, seed, 0, "seed of the pixel noise");

namespace {

std::string Record(int label, std::mt19937& rng) {
  std::string r(distlm::vision::kCifarRecordBytes, '\0');
  r[0] = static_cast<char>(label);
  std::uniform_int_distribution<int> noise(-24, 24);
  for (int c = 0; c < 3; ++c) {
    const int base = 40 + ((label * (c + 3) * 37) % 176);
    for (int y = 0; y < 32; ++y) {
      for (int x = 0; x < 32; ++x) {
        int v = base + noise(rng);
        if (y / 3 == label) v = 255 - v / 2;  // the class's stripe
        r[1 + c * 1024 + y * 32 + x] = static_cast<char>(std::min(255, std::max(0, v)));
      }
    }
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  return distlm::RunMain([&]() -> int {
    absl::ParseCommandLine(argc, argv);
    const std::string out = absl::GetFlag(FLAGS_out);
    if (out.empty()) throw distlm::UserError("--out is required");
    const int train = absl::GetFlag(FLAGS_train_per_class), test = absl::GetFlag(FLAGS_test_per_class);
    if (train < 1 || test < 1) throw distlm::UserError("--train_per_class and --test_per_class must be >= 1");
    std::mt19937 rng(static_cast<uint32_t>(absl::GetFlag(FLAGS_seed)));
    distlm::MakeDirs(out);
    std::string files[5];
    for (int i = 0; i < train * 10; ++i) files[i % 5] += Record(i % 10, rng);
    for (int b = 0; b < 5; ++b) {
      distlm::WriteFileAtomically(out + "/data_batch_" + std::to_string(b + 1) + ".bin", files[b]);
    }
    std::string t;
    for (int i = 0; i < test * 10; ++i) t += Record(i % 10, rng);
    distlm::WriteFileAtomically(out + "/test_batch.bin", t);
    std::printf("make_sample_cifar10: %d training and %d test images in %s\n", train * 10, test * 10, out.c_str());
    return 0;
  });
}
