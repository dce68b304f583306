#include "common/safetensors/sample_files.h"

#include <cstring>

namespace distlm::safetensors::testing {
namespace {

std::string LittleEndian64(uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// A file whose prefix claims `length` header bytes, followed by `rest`.
std::string WithLength(uint64_t length, std::string_view rest) {
  return LittleEndian64(length) + std::string(rest);
}

// One F32 tensor entry.
std::string F32(const std::string& name, const std::string& shape, uint64_t begin, uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

std::string Bytes(size_t n) { return std::string(n, '\0'); }

}  // namespace

std::string AssembleFile(std::string_view header_json, std::string_view data) {
  return LittleEndian64(header_json.size()) + std::string(header_json) + std::string(data);
}

std::string FloatBytes(const std::vector<float>& values) {
  std::string out(values.size() * 4, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  return out;
}

std::vector<SampleFile> CorruptFiles() {
  const std::string one_f32 = FloatBytes({1.5f});
  std::vector<SampleFile> cases = {
      {"empty", "", "file is 0 bytes, too short for a safetensors file"},
      {"seven_bytes", std::string("\x02\0\0\0\0\0\0", 7), "file is 7 bytes, too short"},
      {"header_length_past_end", WithLength(100, "{}"),
       "header length 100 runs past the end of the 10-byte file"},
      {"header_length_2_63", WithLength(uint64_t{1} << 63, "{}"),
       "header length 9223372036854775808 is over the 100000000-byte limit"},
      {"header_length_max", WithLength(~uint64_t{0}, "{}"),
       "header length 18446744073709551615 is over the 100000000-byte limit"},
      {"header_length_zero", WithLength(0, "{}"), "header is not valid JSON"},
      {"bad_json", AssembleFile("{\"a\":{\"dtype\":\"F32\",", ""),
       // Column 21: the end of input, just after the 20th character.
       "header is not valid JSON: parse error at line 1, column 21: syntax error while parsing "
       "object key - unexpected end of input"},
      {"bad_json_line_2", AssembleFile("{\n \"a\": nope}", ""),
       "header is not valid JSON: parse error at line 2, column 8"},
      {"trailing_garbage", AssembleFile("{} x", ""), "header is not valid JSON"},
      {"not_an_object", AssembleFile("[1,2]", ""), "header is an array, not a JSON object"},
      {"deep_array", AssembleFile(std::string(100000, '['), ""),
       "header is an array, not a JSON object"},
      {"tensor_not_object", AssembleFile("{\"a\":5}", ""),
       "tensor 'a' is the number 5, not an object"},
      {"unknown_dtype",
       AssembleFile("{\"a\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,4]}}", one_f32),
       "tensor 'a' has unsupported dtype 'Q7' (supported: BOOL, U8, I8, I16, I32, I64, F16, BF16, "
       "F32, F64)"},
      {"dtype_not_string",
       AssembleFile("{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", one_f32),
       "tensor 'a' has a dtype that is the number 4, not a string"},
      {"negative_dimension", AssembleFile("{" + F32("a", "[-1]", 0, 4) + "}", one_f32),
       "tensor 'a' has dimension -1 in its shape (negative)"},
      {"fractional_dimension", AssembleFile("{" + F32("a", "[1.5]", 0, 4) + "}", one_f32),
       "tensor 'a' has dimension 1.5 in its shape (not an integer)"},
      {"dimension_over_int64",
       AssembleFile("{" + F32("a", "[9223372036854775808]", 0, 4) + "}", one_f32),
       "tensor 'a' has dimension 9223372036854775808 in its shape, more than 2^63-1"},
      {"shape_not_array", AssembleFile("{" + F32("a", "\"1\"", 0, 4) + "}", one_f32),
       "tensor 'a' has a shape that is a string, not an array"},
      {"shape_product_overflow",
       AssembleFile("{" + F32("a", "[4294967296,4294967296]", 0, 4) + "}", one_f32),
       "tensor 'a' has shape [4294967296, 4294967296] with more than 2^63-1 elements"},
      {"byte_size_overflow",
       AssembleFile("{\"a\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],"
                    "\"data_offsets\":[0,8]}}",
                    Bytes(8)),
       "tensor 'a' has shape [2305843009213693952] whose size in bytes does not fit in 64 bits"},
      {"offsets_reversed", AssembleFile("{" + F32("a", "[1]", 4, 0) + "}", one_f32),
       "tensor 'a' has data_offsets [4, 0] that end before they begin"},
      {"offsets_past_end", AssembleFile("{" + F32("a", "[2]", 0, 8) + "}", one_f32),
       "tensor 'a' has data_offsets [0, 8] past the end of the 4-byte data buffer"},
      {"offsets_near_2_64",
       AssembleFile("{" + F32("a", "[1]", 18446744073709551611u, 18446744073709551615u) + "}",
                    one_f32),
       "tensor 'a' has data_offsets [18446744073709551611, 18446744073709551615] past the end of "
       "the 4-byte data buffer"},
      {"offsets_three",
       AssembleFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", one_f32),
       "tensor 'a' has data_offsets that are not [begin, end]"},
      {"offsets_negative",
       AssembleFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", one_f32),
       "tensor 'a' has data_offsets that are not [begin, end]"},
      {"size_mismatch", AssembleFile("{" + F32("a", "[3]", 0, 8) + "}", Bytes(8)),
       "tensor 'a' has data_offsets [0, 8] (8 bytes) but dtype F32 and shape [3] need 12 bytes"},
      {"overlap",
       AssembleFile("{" + F32("a", "[2]", 0, 8) + "," + F32("b", "[2]", 4, 12) + "}", Bytes(12)),
       "tensors 'a' [0, 8] and 'b' [4, 12] overlap in the data buffer"},
      {"hole",
       AssembleFile("{" + F32("a", "[1]", 0, 4) + "," + F32("b", "[1]", 8, 12) + "}", Bytes(12)),
       "bytes [4, 8) of the data buffer belong to no tensor (a hole before tensor 'b')"},
      {"unused_tail", AssembleFile("{" + F32("a", "[1]", 0, 4) + "}", Bytes(8)),
       "bytes [4, 8) at the end of the 8-byte data buffer belong to no tensor"},
      {"missing_offsets", AssembleFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", one_f32),
       "tensor 'a' has no \"data_offsets\""},
      {"duplicate_tensor",
       AssembleFile("{" + F32("a", "[1]", 0, 4) + "," + F32("a", "[1]", 0, 4) + "}", one_f32),
       "tensor 'a' appears twice in the header"},
      {"duplicate_field",
       AssembleFile("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],"
                    "\"data_offsets\":[0,4]}}",
                    one_f32),
       "tensor 'a' has the field \"dtype\" twice"},
      {"metadata_value_not_string", AssembleFile("{\"__metadata__\":{\"k\":1}}", ""),
       "__metadata__ value of 'k' is the number 1, not a string"},
      {"metadata_not_object", AssembleFile("{\"__metadata__\":[]}", ""),
       "\"__metadata__\" is an array, not an object"},
      {"metadata_duplicate_key", AssembleFile("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", ""),
       "__metadata__ has the key 'k' twice"},
      {"name_not_utf8",
       AssembleFile("{\"\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", one_f32),
       "header is not valid JSON"},
      // An escaped newline is a legal name character; the error must still be one line.
      {"name_with_newline",
       AssembleFile("{\"a\\nb\":{\"dtype\":\"Q\",\"shape\":[1],\"data_offsets\":[0,4]}}", one_f32),
       "tensor 'a\\x0ab' has unsupported dtype 'Q'"},
      {"bool_byte_not_0_or_1",
       AssembleFile("{\"m\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}",
                    std::string("\x01\x02", 2)),
       "tensor 'm' (BOOL) has byte 2 at element 1", /*header_ok=*/true},
  };
  return cases;
}

std::vector<SampleFile> ValidFiles() {
  // Every dtype, a scalar, an empty tensor at a boundary, metadata, an unknown field with a
  // nested value, header order unlike byte order, and space padding after the object.
  const std::string all =
      "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\xc3\xa9\"},"
      "\"f64\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
      "\"i64\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[8,16]},"
      "\"f32\":{\"dtype\":\"F32\",\"shape\":[2,1],\"data_offsets\":[16,24]},"
      "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[24,24],"
      "\"extra\":{\"x\":[[1],{\"y\":null}]}},"
      "\"i32\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[24,28]},"
      "\"f16\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[28,30]},"
      "\"bf16\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[30,32]},"
      "\"i16\":{\"dtype\":\"I16\",\"shape\":[1],\"data_offsets\":[32,34]},"
      "\"u8\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[35,36]},"
      "\"i8\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[34,35]},"
      "\"bool\":{\"dtype\":\"BOOL\",\"shape\":[1,1],\"data_offsets\":[36,37]}}   ";
  std::string data = Bytes(37);
  data[36] = 1;
  return {
      {"valid_empty", AssembleFile("{}      ", ""), ""},
      {"valid_all_dtypes", AssembleFile(all, data), ""},
      {"valid_one_f32", AssembleFile("{" + F32("w", "[2]", 0, 8) + "}", FloatBytes({1.f, -2.f})),
       ""},
  };
}

}  // namespace distlm::safetensors::testing
