#include "common/safetensors/header.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/runtime/errors.h"
#include "common/safetensors/sample_files.h"

namespace distlm::safetensors {
namespace {

std::string ErrorOf(std::string_view json, uint64_t data_size) {
  try {
    ParseHeader(json, data_size, "h.safetensors");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(HeaderTest, ReadsEveryFieldInByteOrder) {
  const auto valid = testing::ValidFiles();
  const auto& file = valid[1];
  ASSERT_EQ(file.name, "valid_all_dtypes");
  auto parts = SplitFile(file.bytes, "all");
  Header h = ParseHeader(parts.header_json, parts.data.size(), "all");

  // Expected from the hand-written header in sample_files.cc, sorted by data_offsets; the
  // empty tensor [24, 24] comes before i32 [24, 28], and i8 [34, 35] before u8 [35, 36].
  std::vector<TensorEntry> want = {
      {"f64", "F64", {1}, 0, 8},      {"i64", "I64", {}, 8, 16},     {"f32", "F32", {2, 1}, 16, 24},
      {"empty", "F32", {0, 3}, 24, 24}, {"i32", "I32", {1}, 24, 28},  {"f16", "F16", {1}, 28, 30},
      {"bf16", "BF16", {1}, 30, 32},  {"i16", "I16", {1}, 32, 34},   {"i8", "I8", {1}, 34, 35},
      {"u8", "U8", {1}, 35, 36},      {"bool", "BOOL", {1, 1}, 36, 37},
  };
  EXPECT_EQ(h.tensors, want);
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "caf\xc3\xa9"}};
  EXPECT_EQ(h.metadata, meta);
}

TEST(HeaderTest, DtypeSizes) {
  EXPECT_EQ(DtypeSize("F64"), 8u);
  EXPECT_EQ(DtypeSize("BF16"), 2u);
  EXPECT_EQ(DtypeSize("BOOL"), 1u);
  EXPECT_EQ(DtypeSize("U16"), 0u);  // in the format, but LibTorch 1.13 has no uint16
  EXPECT_EQ(DtypeSize("f32"), 0u);  // names are case-sensitive
}

TEST(HeaderTest, AcceptsWhitespaceAndEmptyHeaders) {
  EXPECT_EQ(ErrorOf("{}", 0), "");
  EXPECT_EQ(ErrorOf("{}       ", 0), "");
  EXPECT_EQ(ErrorOf(" \n{ } \t\r\n", 0), "");
  EXPECT_EQ(ErrorOf("{\"__metadata__\":{}}", 0), "");
  // A zero-byte tensor may sit at either end of the buffer.
  EXPECT_EQ(ErrorOf("{\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                    "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                    "\"y\":{\"dtype\":\"I64\",\"shape\":[5,0],\"data_offsets\":[2,2]}}",
                    2),
            "");
}

TEST(HeaderTest, EmptyTensorInsideAnotherOverlaps) {
  EXPECT_NE(ErrorOf("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                    "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[1,1]}}",
                    2)
                .find("tensors 'a' [0, 2] and 'z' [1, 1] overlap"),
            std::string::npos);
}

TEST(HeaderTest, EmptyDimensionsStillBoundTheOthers) {
  // Zero elements, but 2^62 * 2^62 would overflow the strides LibTorch computes.
  EXPECT_NE(ErrorOf("{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,"
                    "4611686018427387904],\"data_offsets\":[0,0]}}",
                    0)
                .find("more than 2^63-1 elements"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("{\"a\":{\"dtype\":\"F32\",\"shape\":[0,9223372036854775807],"
                    "\"data_offsets\":[0,0]}}",
                    0),
            "");
}

TEST(HeaderTest, LengthPrefixIsLittleEndian) {
  EXPECT_EQ(ParseHeaderLength(std::string("\x10\0\0\0\0\0\0\0", 8), 100, "f"), 16u);
  EXPECT_EQ(ParseHeaderLength(std::string("\x01\x02\0\0\0\0\0\0", 8), 1000, "f"), 0x0201u);
  EXPECT_EQ(ParseHeaderLength(std::string("\x00\xe1\xf5\x05\0\0\0\0", 8), 200000000, "f"),
            100000000u);  // exactly the limit is allowed
  EXPECT_THROW(ParseHeaderLength(std::string("\x01\xe1\xf5\x05\0\0\0\0", 8), 200000000, "f"),
               UserError);
  EXPECT_THROW(ParseHeaderLength(std::string("\x09\0\0\0\0\0\0\0", 8), 16, "f"), UserError);
  EXPECT_EQ(ParseHeaderLength(std::string("\x08\0\0\0\0\0\0\0", 8), 16, "f"), 8u);
}

TEST(HeaderTest, SerializesTheWayTheFormatSays) {
  Header h;
  h.metadata = {{"format", "pt"}};
  h.tensors = {{"w", "F32", {2, 3}, 0, 24}, {"b", "I64", {}, 24, 32}};
  const std::string json = SerializeHeader(h, "out");
  const std::string object =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
      "\"b\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[24,32]}}";
  ASSERT_EQ(json.substr(0, object.size()), object);
  EXPECT_EQ(json.size() % 8, 0u);
  EXPECT_LT(json.size() - object.size(), 8u);
  EXPECT_EQ(json.find_first_not_of(' ', object.size()), std::string::npos);
  EXPECT_EQ(ParseHeader(json, 32, "out"), h);
  // nlohmann reads it as the same object.
  auto parsed = nlohmann::json::parse(json);
  EXPECT_EQ(parsed["w"]["data_offsets"], nlohmann::json({0, 24}));
}

TEST(HeaderTest, SerializeEscapesNamesAndRefusesBadOnes) {
  Header h;
  h.tensors = {{"a\"b\n", "U8", {1}, 0, 1}};
  const std::string json = SerializeHeader(h, "out");
  EXPECT_NE(json.find("\"a\\\"b\\n\""), std::string::npos) << json;
  EXPECT_EQ(ParseHeader(json, 1, "out"), h);

  Header bad_utf8;
  bad_utf8.tensors = {{"x\xff", "U8", {1}, 0, 1}};
  EXPECT_THROW(SerializeHeader(bad_utf8, "out"), UserError);
  Header duplicate;
  duplicate.tensors = {{"x", "U8", {1}, 0, 1}, {"x", "U8", {1}, 1, 2}};
  EXPECT_THROW(SerializeHeader(duplicate, "out"), UserError);
  Header reserved;
  reserved.tensors = {{"__metadata__", "U8", {1}, 0, 1}};
  EXPECT_THROW(SerializeHeader(reserved, "out"), UserError);
}

TEST(HeaderTest, ManyTensorsParseInLinearTime) {
  // 200k entries: a parser quadratic in the number of keys (ordered_json, or nlohmann's
  // callback parser) would take minutes here.
  constexpr int kCount = 200000;
  std::string json = "{";
  for (int i = 0; i < kCount; ++i) {
    if (i > 0) json += ',';
    json += "\"t" + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" +
            std::to_string(i) + "," + std::to_string(i + 1) + "]}";
  }
  json += '}';
  Header h = ParseHeader(json, kCount, "many");
  ASSERT_EQ(h.tensors.size(), static_cast<size_t>(kCount));
  EXPECT_EQ(h.tensors.back().name, "t199999");
}

TEST(HeaderTest, PrintableEscapesAndCuts) {
  EXPECT_EQ(Printable("ab\ncd"), "ab\\x0acd");
  EXPECT_EQ(Printable("\xc3\xa9"), "\\xc3\\xa9");
  EXPECT_EQ(Printable(std::string(200, 'x'), 5), "xxxxx...");
  EXPECT_EQ(Quoted("w"), "'w'");
}

}  // namespace
}  // namespace distlm::safetensors
