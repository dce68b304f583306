#include "common/safetensors/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/safetensors/sample_files.h"
#include "common/testing/subprocess.h"
#include "common/testing/user_error.h"

namespace distlm::safetensors {
namespace {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

std::map<std::string, torch::Tensor> ByName(const NamedTensors& tensors) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, t] : tensors) out[name] = t;
  return out;
}

// Same dtype, shape and bytes (bitwise, so NaNs and -0.0 count too).
void ExpectSameTensor(const torch::Tensor& got, const torch::Tensor& want, const std::string& name) {
  SCOPED_TRACE(name);
  ASSERT_EQ(got.scalar_type(), want.scalar_type());
  ASSERT_EQ(got.sizes(), want.sizes());
  torch::Tensor w = want.contiguous();
  ASSERT_TRUE(got.is_contiguous());
  ASSERT_EQ(got.nbytes(), w.nbytes());
  if (w.nbytes() > 0) {
    EXPECT_EQ(std::memcmp(got.data_ptr(), w.data_ptr(), w.nbytes()), 0);
  }
}

NamedTensors EveryDtype() {
  torch::manual_seed(7);
  auto randn = [](std::vector<int64_t> shape, c10::ScalarType type) {
    return torch::randn(shape).mul(100).to(type);
  };
  return {
      {"f32", torch::randn({3, 4})},
      {"f64", torch::randn({5}, torch::kDouble)},
      {"f16", randn({2, 3}, torch::kHalf)},
      {"bf16", randn({7}, torch::kBFloat16)},
      {"i64", torch::tensor({int64_t{1} << 40, int64_t{-3}, int64_t{0}})},
      {"i32", randn({4}, torch::kInt)},
      {"i16", randn({2, 2}, torch::kShort)},
      {"i8", torch::tensor({-128, 127, 0}, torch::kChar)},
      {"u8", torch::tensor({0, 255, 17}, torch::kByte)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(2.5f)},
      {"empty", torch::empty({0, 4})},
      {"transposed", torch::arange(6, torch::kFloat).reshape({2, 3}).t()},
      {"grad", torch::ones({2}, torch::requires_grad())},
  };
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = distlm::testing::MakeTempDir("safetensors"); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST_F(SafetensorsTest, RoundTripKeepsEveryDtypeExactly) {
  const NamedTensors tensors = EveryDtype();
  SaveFile(Path("all.safetensors"), tensors, {{"format", "pt"}, {"step", "12"}});
  const NamedTensors loaded = LoadFile(Path("all.safetensors"), /*to_float32=*/false);

  ASSERT_EQ(loaded.size(), tensors.size());
  // Saved sorted by name, and LoadFile returns byte order, which is then name order.
  for (size_t i = 1; i < loaded.size(); ++i) EXPECT_LT(loaded[i - 1].first, loaded[i].first);
  auto got = ByName(loaded);
  for (const auto& [name, want] : tensors) {
    ASSERT_EQ(got.count(name), 1u) << name;
    ExpectSameTensor(got[name], want.detach(), name);
  }
  Header header = ReadHeader(Path("all.safetensors"));
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "12"}};
  EXPECT_EQ(header.metadata, meta);
}

TEST_F(SafetensorsTest, SameTensorsGiveSameBytes) {
  NamedTensors tensors = EveryDtype();
  SaveFile(Path("a.safetensors"), tensors, {{"k", "v"}});
  std::reverse(tensors.begin(), tensors.end());
  SaveFile(Path("b.safetensors"), tensors, {{"k", "v"}});
  EXPECT_EQ(ReadFile(Path("a.safetensors")), ReadFile(Path("b.safetensors")));
}

TEST_F(SafetensorsTest, HalfTypesBecomeFloat32AsTorchConvertsThem) {
  const NamedTensors tensors = EveryDtype();
  SaveFile(Path("h.safetensors"), tensors);
  auto got = ByName(LoadFile(Path("h.safetensors")));  // to_float32 by default
  for (const auto& [name, want] : tensors) {
    if (want.scalar_type() == torch::kHalf || want.scalar_type() == torch::kBFloat16) {
      ExpectSameTensor(got[name], want.to(torch::kFloat), name);
    } else {
      EXPECT_EQ(got[name].scalar_type(), want.scalar_type()) << name;  // F64 stays double
    }
  }
}

// IEEE half from its bits, by the closed form: (-1)^s * 2^(e-15) * 1.m, subnormals 2^-14 * 0.m.
float HalfFromBits(uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

// bfloat16 is the top half of a float32.
float BFloat16FromBits(uint16_t bits) {
  uint32_t f = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &f, 4);
  return out;
}

TEST_F(SafetensorsTest, EveryHalfAndBFloat16BitPatternConvertsExactly) {
  // All 65536 patterns of each type, hand-assembled into one file.
  std::string data(2 * 2 * 65536, '\0');
  for (uint32_t i = 0; i < 65536; ++i) {
    data[2 * i] = static_cast<char>(i & 0xff);
    data[2 * i + 1] = static_cast<char>(i >> 8);
    data[131072 + 2 * i] = static_cast<char>(i & 0xff);
    data[131072 + 2 * i + 1] = static_cast<char>(i >> 8);
  }
  const std::string header =
      "{\"h\":{\"dtype\":\"F16\",\"shape\":[65536],\"data_offsets\":[0,131072]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[65536],\"data_offsets\":[131072,262144]}}";
  WriteFileAtomically(Path("bits.safetensors"), testing::AssembleFile(header, data));

  auto got = ByName(LoadFile(Path("bits.safetensors")));
  ASSERT_EQ(got["h"].scalar_type(), torch::kFloat);
  ASSERT_EQ(got["b"].scalar_type(), torch::kFloat);
  const float* h = got["h"].data_ptr<float>();
  const float* b = got["b"].data_ptr<float>();
  int mismatches = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    for (auto [value, want] : {std::pair{h[i], HalfFromBits(i)}, std::pair{b[i], BFloat16FromBits(i)}}) {
      bool same = std::isnan(want) ? std::isnan(value)
                                   : std::memcmp(&value, &want, 4) == 0;  // keeps -0.0 apart
      if (!same && ++mismatches < 5) ADD_FAILURE() << "bits " << i << ": " << value << " vs " << want;
    }
  }
  EXPECT_EQ(mismatches, 0);

  // Kept as half types, they are the very bits of the file.
  auto raw = ByName(LoadFile(Path("bits.safetensors"), /*to_float32=*/false));
  ASSERT_EQ(raw["h"].scalar_type(), torch::kHalf);
  ASSERT_EQ(raw["b"].scalar_type(), torch::kBFloat16);
  EXPECT_EQ(std::memcmp(raw["h"].data_ptr(), data.data(), 131072), 0);
  EXPECT_EQ(std::memcmp(raw["b"].data_ptr(), data.data() + 131072, 131072), 0);
}

TEST_F(SafetensorsTest, ReadsAHandAssembledFile) {
  const std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"ids\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[16,40]},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
  std::string data = testing::FloatBytes({1.0f, -2.5f, 3.25f, 1e-3f});
  for (int64_t v : {int64_t{1}, int64_t{-1}, int64_t{1} << 40}) {
    for (int b = 0; b < 8; ++b) data += static_cast<char>((static_cast<uint64_t>(v) >> (8 * b)) & 0xff);
  }
  WriteFileAtomically(Path("hand.safetensors"), testing::AssembleFile(header, data));

  NamedTensors loaded = LoadFile(Path("hand.safetensors"));
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].first, "w");  // byte order, not header order
  EXPECT_EQ(loaded[1].first, "ids");
  const torch::Tensor& w = loaded[0].second;
  ASSERT_EQ(w.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(w[0][0].item<float>(), 1.0f);
  EXPECT_EQ(w[0][1].item<float>(), -2.5f);
  EXPECT_EQ(w[1][0].item<float>(), 3.25f);
  EXPECT_EQ(w[1][1].item<float>(), 1e-3f);
  const torch::Tensor& ids = loaded[1].second;
  ASSERT_EQ(ids.scalar_type(), torch::kLong);
  EXPECT_EQ(ids[0].item<int64_t>(), 1);
  EXPECT_EQ(ids[1].item<int64_t>(), -1);
  EXPECT_EQ(ids[2].item<int64_t>(), int64_t{1} << 40);
}

TEST_F(SafetensorsTest, SavedFileHasTheFormatsLayout) {
  torch::Tensor b = torch::tensor({1.5f, -2.0f, 4.0f});
  torch::Tensor a = torch::tensor({7, -9}, torch::kInt);
  SaveFile(Path("layout.safetensors"), {{"b", b}, {"a", a}}, {{"format", "pt"}});
  const std::string file = ReadFile(Path("layout.safetensors"));

  // Parse by hand: u64 little-endian N, N bytes of JSON, then the data buffer.
  ASSERT_GE(file.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[i]);
  EXPECT_EQ(n % 8, 0u);  // data starts 8-byte aligned
  ASSERT_EQ(file.size(), 8 + n + 8 + 12);
  const std::string json = file.substr(8, n);
  EXPECT_EQ(json[0], '{');  // the reference reader requires this
  EXPECT_EQ(json.find_last_not_of(' '), json.rfind('}'));  // padded with spaces only
  auto h = nlohmann::json::parse(json);
  EXPECT_EQ(h["__metadata__"], nlohmann::json({{"format", "pt"}}));
  EXPECT_EQ(h["a"]["dtype"], "I32");
  EXPECT_EQ(h["a"]["shape"], nlohmann::json({2}));
  EXPECT_EQ(h["a"]["data_offsets"], nlohmann::json({0, 8}));
  EXPECT_EQ(h["b"]["dtype"], "F32");
  EXPECT_EQ(h["b"]["shape"], nlohmann::json({3}));
  EXPECT_EQ(h["b"]["data_offsets"], nlohmann::json({8, 20}));
  EXPECT_EQ(h.size(), 3u);
  const std::string data = file.substr(8 + n);
  const std::string want_a("\x07\0\0\0\xf7\xff\xff\xff", 8);  // 7, -9 as little-endian int32
  EXPECT_EQ(data.substr(0, 8), want_a);
  EXPECT_EQ(data.substr(8), testing::FloatBytes({1.5f, -2.0f, 4.0f}));
}

TEST_F(SafetensorsTest, ReadsTheReferenceBertTiny) {
  SKIP_WITHOUT_REFERENCE(ref);
  const std::string model_dir = ref + "/bert_tiny_reference";
  const auto config = nlohmann::json::parse(ReadFile(model_dir + "/config.json"));
  const int64_t hidden = config["hidden_size"], layers = config["num_hidden_layers"];
  const int64_t vocab = config["vocab_size"], positions = config["max_position_embeddings"];
  const int64_t types = config["type_vocab_size"], intermediate = config["intermediate_size"];
  const int64_t labels = config["num_labels"];
  EXPECT_EQ(hidden, 64);

  const NamedTensors loaded = LoadFile(model_dir + "/model.safetensors");
  auto got = ByName(loaded);
  using Shape = std::vector<int64_t>;
  std::map<std::string, Shape> want = {
      {"bert.embeddings.word_embeddings.weight", {vocab, hidden}},
      {"bert.embeddings.position_embeddings.weight", {positions, hidden}},
      {"bert.embeddings.token_type_embeddings.weight", {types, hidden}},
      {"bert.embeddings.LayerNorm.weight", {hidden}},
      {"bert.embeddings.LayerNorm.bias", {hidden}},
      {"bert.pooler.dense.weight", {hidden, hidden}},
      {"bert.pooler.dense.bias", {hidden}},
      {"classifier.weight", {labels, hidden}},
      {"classifier.bias", {labels}},
  };
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value",
                          "attention.output.dense"}) {
      want[p + m + ".weight"] = {hidden, hidden};
      want[p + m + ".bias"] = {hidden};
    }
    want[p + "intermediate.dense.weight"] = {intermediate, hidden};
    want[p + "intermediate.dense.bias"] = {intermediate};
    want[p + "output.dense.weight"] = {hidden, intermediate};
    want[p + "output.dense.bias"] = {hidden};
    for (const char* ln : {"attention.output.LayerNorm", "output.LayerNorm"}) {
      want[p + ln + ".weight"] = {hidden};
      want[p + ln + ".bias"] = {hidden};
    }
  }
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [name, shape] : want) {
    ASSERT_EQ(got.count(name), 1u) << name;
    EXPECT_EQ(got[name].sizes().vec(), shape) << name;
    EXPECT_EQ(got[name].scalar_type(), torch::kFloat) << name;
    EXPECT_TRUE(torch::isfinite(got[name]).all().item<bool>()) << name;
  }
  // Random weights, not zeros: the bytes were really read.
  EXPECT_GT(got["bert.embeddings.word_embeddings.weight"].abs().sum().item<float>(), 0.0f);

  SaveFile(Path("again.safetensors"), loaded);
  auto again = ByName(LoadFile(Path("again.safetensors")));
  ASSERT_EQ(again.size(), got.size());
  for (const auto& [name, t] : got) ExpectSameTensor(again[name], t, name);

  // The pre-training layout has other names (and more tensors); it loads too.
  auto pretraining = ByName(LoadFile(model_dir + "/pretraining_layout/model.safetensors"));
  EXPECT_EQ(pretraining.count("bert.embeddings.LayerNorm.gamma"), 1u);
}

TEST_F(SafetensorsTest, CorruptFilesGiveOneLineErrorsNamingTheFile) {
  for (const auto& c : testing::CorruptFiles()) {
    SCOPED_TRACE(c.name);
    const std::string path = Path(c.name + ".safetensors");
    WriteFileAtomically(path, c.bytes);
    const std::string error = ::distlm::testing::UserErrorOf([&] { LoadFile(path); });
    EXPECT_EQ(error.rfind(path + ": ", 0), 0u) << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

TEST_F(SafetensorsTest, MissingFileAndDirectory) {
  const std::string missing = Path("nope.safetensors");
  EXPECT_EQ(::distlm::testing::UserErrorOf([&] { LoadFile(missing); }),
            missing + ": cannot open: No such file or directory");
  EXPECT_EQ(::distlm::testing::UserErrorOf([&] { LoadFile(dir_); }), dir_ + ": is a directory, not a safetensors file");
  EXPECT_EQ(::distlm::testing::UserErrorOf([&] { ReadHeader(missing); }),
            missing + ": cannot open: No such file or directory");
}

TEST_F(SafetensorsTest, SaveRefusesWhatTheFormatCannotHold) {
  const std::string path = Path("bad.safetensors");
  auto save_error = [&](const NamedTensors& tensors) {
    return ::distlm::testing::UserErrorOf([&] { SaveFile(path, tensors); });
  };
  EXPECT_EQ(save_error({{"u", torch::Tensor()}}), path + ": tensor 'u' is undefined");
  EXPECT_NE(save_error({{"c", torch::zeros({2}, torch::kComplexFloat)}}).find("tensor 'c' has dtype"),
            std::string::npos);
  EXPECT_NE(save_error({{"s", torch::eye(2).to_sparse()}}).find("tensor 's' is not dense"),
            std::string::npos);
  EXPECT_EQ(save_error({{"x", torch::ones(1)}, {"x", torch::zeros(1)}}),
            path + ": tensor 'x' is given twice");
  EXPECT_EQ(save_error({{"__metadata__", torch::ones(1)}}),
            path + ": \"__metadata__\" cannot name a tensor");
  EXPECT_NE(save_error({{"bad\xff", torch::ones(1)}}).find("is not valid UTF-8"), std::string::npos);
  EXPECT_FALSE(PathExists(path));  // nothing half-written
  EXPECT_THROW(SaveFile(dir_ + "/no/such/dir/x.safetensors", {{"x", torch::ones(1)}}), UserError);
}

}  // namespace
}  // namespace distlm::safetensors
