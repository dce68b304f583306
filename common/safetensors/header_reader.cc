// ReadHeaderEntries: the header JSON streamed through nlohmann's SAX parser, entries built and
// checked as they are read (header.cc then checks how they tile the data buffer).
#include <limits>
#include <unordered_set>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/safetensors/header.h"
#include "common/safetensors/header_internal.h"

namespace distlm::safetensors::internal {
namespace {

using Json = nlohmann::json;

// Shapes can be long in a hostile file; an error shows the first few dimensions.
std::string ShapeText(const std::vector<int64_t>& shape) {
  constexpr size_t kShown = 8;
  std::string out = "[";
  for (size_t i = 0; i < shape.size() && i < kShown; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() > kShown) out += ", ... (" + std::to_string(shape.size()) + " dimensions)";
  return out + "]";
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; the rest says where.
std::string JsonErrorText(const std::exception& e) {
  std::string_view what = e.what();
  if (what.rfind("[json.exception.", 0) == 0) {
    auto close = what.find("] ");
    if (close != std::string_view::npos) what.remove_prefix(close + 2);
  }
  return Printable(what, 300);
}

// Element count and byte size of an entry, or a one-line error. Dimensions that are zero make
// the tensor empty, but the product of the others must still fit in int64_t: LibTorch computes
// strides from it.
uint64_t CheckedByteSize(const TensorEntry& t, size_t item_size, const std::string& source) {
  constexpr uint64_t kMaxElements = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t product = 1;
  bool empty = false;
  for (int64_t dim : t.shape) {
    if (dim == 0) {
      empty = true;
      continue;
    }
    if (__builtin_mul_overflow(product, static_cast<uint64_t>(dim), &product) ||
        product > kMaxElements) {
      Fail(source, "tensor " + Quoted(t.name) + " has shape " + ShapeText(t.shape) +
                       " with more than 2^63-1 elements");
    }
  }
  uint64_t bytes = 0;
  if (!empty && __builtin_mul_overflow(product, static_cast<uint64_t>(item_size), &bytes)) {
    Fail(source, "tensor " + Quoted(t.name) + " has shape " + ShapeText(t.shape) +
                     " whose size in bytes does not fit in 64 bits");
  }
  return bytes;
}

// Streams the header through nlohmann's SAX parser and builds the entries directly. Compared
// with parsing into a json value first, this keeps the file order, finds duplicate keys (a json
// object silently keeps one), stops at the first wrong token, and stays linear in the header
// size (the callback DOM parser and ordered_json are quadratic in the number of keys).
class HeaderReader : public nlohmann::json_sax<Json> {
 public:
  HeaderReader(uint64_t data_size, const std::string& source)
      : data_size_(data_size), source_(source) {}

  Header Take() {
    if (state_ != State::kDone) Fail(source_, "header JSON ended early");
    return std::move(header_);
  }

  bool null() override { return Scalar("null"); }
  bool boolean(bool) override { return Scalar("a boolean"); }
  bool binary(binary_t&) override { return Scalar("binary data"); }

  bool number_integer(number_integer_t value) override {
    if (value >= 0) return Unsigned(static_cast<uint64_t>(value));
    return NotUnsigned(std::to_string(value), "negative");
  }

  bool number_unsigned(number_unsigned_t value) override { return Unsigned(value); }

  bool number_float(number_float_t, const string_t& text) override {
    return NotUnsigned(text, "not an integer");
  }

  bool string(string_t& value) override {
    switch (state_) {
      case State::kMetadataValue:
        header_.metadata.emplace(std::move(key_), std::move(value));
        state_ = State::kMetadata;
        return true;
      case State::kTensorValue:
        if (field_ == Field::kDtype) {
          tensor_.dtype = std::move(value);
          state_ = State::kTensor;
          return true;
        }
        break;
      default:
        break;
    }
    return Scalar("a string");
  }

  bool start_object(std::size_t) override {
    switch (state_) {
      case State::kStart:
        state_ = State::kRoot;
        return true;
      case State::kRootValue:
        if (key_ == kMetadataKey) {
          state_ = State::kMetadata;
        } else {
          tensor_ = TensorEntry{};
          tensor_.name = std::move(key_);
          seen_fields_ = 0;
          state_ = State::kTensor;
        }
        return true;
      case State::kTensorValue:
        if (field_ == Field::kOther) return StartSkipping();
        break;
      case State::kSkip:
        ++skip_depth_;
        return true;
      default:
        break;
    }
    return Scalar("an object");
  }

  bool start_array(std::size_t) override {
    switch (state_) {
      case State::kTensorValue:
        if (field_ == Field::kShape) {
          state_ = State::kShape;
          return true;
        }
        if (field_ == Field::kOffsets) {
          offsets_seen_ = 0;
          state_ = State::kOffsets;
          return true;
        }
        if (field_ == Field::kOther) return StartSkipping();
        break;
      case State::kSkip:
        ++skip_depth_;
        return true;
      default:
        break;
    }
    return Scalar("an array");
  }

  bool key(string_t& key) override {
    switch (state_) {
      case State::kRoot:
        if (!names_.insert(key).second) {
          Fail(source_, key == kMetadataKey ? "header has \"__metadata__\" twice"
                                           : "tensor " + Quoted(key) + " appears twice in the header");
        }
        key_ = std::move(key);
        state_ = State::kRootValue;
        return true;
      case State::kMetadata:
        if (header_.metadata.count(key) != 0) {
          Fail(source_, "__metadata__ has the key " + Quoted(key) + " twice");
        }
        key_ = std::move(key);
        state_ = State::kMetadataValue;
        return true;
      case State::kTensor:
        return TensorField(key);
      case State::kSkip:
        return true;
      default:
        Fail(source_, "header JSON has a key where none belongs");  // the parser prevents this
    }
  }

  bool end_object() override {
    switch (state_) {
      case State::kRoot:
        state_ = State::kDone;
        return true;
      case State::kMetadata:
        state_ = State::kRoot;
        return true;
      case State::kTensor:
        FinishTensor();
        state_ = State::kRoot;
        return true;
      case State::kSkip:
        return EndSkipped();
      default:
        Fail(source_, "header JSON closes an object it did not open");  // the parser prevents this
    }
  }

  bool end_array() override {
    switch (state_) {
      case State::kShape:
        state_ = State::kTensor;
        return true;
      case State::kOffsets:
        if (offsets_seen_ != 2) Fail(source_, TensorPrefix() + OffsetsRule());
        state_ = State::kTensor;
        return true;
      case State::kSkip:
        return EndSkipped();
      default:
        Fail(source_, "header JSON closes an array it did not open");  // the parser prevents this
    }
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    Fail(source_, "header is not valid JSON: " + JsonErrorText(e));
  }

 private:
  enum class State {
    kStart,          // before the top-level value
    kRoot,           // in the top-level object, before a key or its end
    kRootValue,      // after a top-level key
    kMetadata,       // in "__metadata__", before a key or its end
    kMetadataValue,  // after a metadata key
    kTensor,         // in a tensor entry, before a key or its end
    kTensorValue,    // after a field name of a tensor entry
    kShape,          // in a shape array
    kOffsets,        // in a data_offsets array
    kSkip,           // inside the value of an unknown field
    kDone,           // after the top-level object
  };
  enum class Field { kDtype = 1, kShape = 2, kOffsets = 4, kOther = 8 };

  std::string TensorPrefix() const { return "tensor " + Quoted(tensor_.name) + " "; }
  static std::string OffsetsRule() {
    return "has data_offsets that are not [begin, end] (two non-negative integers)";
  }

  // A value of the wrong kind: say where it is and what was expected there.
  bool Scalar(const std::string& what) {
    switch (state_) {
      case State::kStart:
        Fail(source_, "header is " + what + ", not a JSON object");
      case State::kRootValue:
        if (key_ == kMetadataKey) Fail(source_, "\"__metadata__\" is " + what + ", not an object");
        Fail(source_, "tensor " + Quoted(key_) + " is " + what + ", not an object");
      case State::kMetadataValue:
        Fail(source_, "__metadata__ value of " + Quoted(key_) + " is " + what +
                          ", not a string");
      case State::kTensorValue:
        switch (field_) {
          case Field::kDtype:
            Fail(source_, TensorPrefix() + "has a dtype that is " + what + ", not a string");
          case Field::kShape:
            Fail(source_, TensorPrefix() + "has a shape that is " + what + ", not an array");
          case Field::kOffsets:
            Fail(source_, TensorPrefix() + OffsetsRule());
          case Field::kOther:
            state_ = State::kTensor;  // unknown fields are ignored
            return true;
        }
        break;
      case State::kShape:
        Fail(source_, TensorPrefix() + "has " + what + " in its shape; dimensions are non-negative integers");
      case State::kOffsets:
        Fail(source_, TensorPrefix() + OffsetsRule());
      case State::kSkip:
        return true;
      default:
        break;
    }
    Fail(source_, "header JSON has " + what + " where none belongs");
  }

  bool Unsigned(uint64_t value) {
    switch (state_) {
      case State::kShape:
        if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          Fail(source_, TensorPrefix() + "has dimension " + std::to_string(value) +
                            " in its shape, more than 2^63-1");
        }
        tensor_.shape.push_back(static_cast<int64_t>(value));
        return true;
      case State::kOffsets:
        if (offsets_seen_ == 0) tensor_.begin = value;
        if (offsets_seen_ == 1) tensor_.end = value;
        if (++offsets_seen_ > 2) Fail(source_, TensorPrefix() + OffsetsRule());
        return true;
      default:
        return Scalar("the number " + std::to_string(value));
    }
  }

  bool NotUnsigned(const std::string& text, const std::string& why) {
    if (state_ == State::kShape) {
      Fail(source_, TensorPrefix() + "has dimension " + Printable(text, 40) + " in its shape (" +
                        why + "); dimensions are non-negative integers");
    }
    return Scalar("the number " + Printable(text, 40));
  }

  bool TensorField(const std::string& name) {
    if (name == "dtype") {
      field_ = Field::kDtype;
    } else if (name == "shape") {
      field_ = Field::kShape;
    } else if (name == "data_offsets") {
      field_ = Field::kOffsets;
    } else {
      field_ = Field::kOther;
    }
    int bit = static_cast<int>(field_);
    if (field_ != Field::kOther) {
      if (seen_fields_ & bit) Fail(source_, TensorPrefix() + "has the field \"" + name + "\" twice");
      seen_fields_ |= bit;
    }
    state_ = State::kTensorValue;
    return true;
  }

  bool StartSkipping() {
    skip_depth_ = 1;
    state_ = State::kSkip;
    return true;
  }

  bool EndSkipped() {
    if (--skip_depth_ == 0) state_ = State::kTensor;
    return true;
  }

  // Checks one entry on its own; how entries fit together is checked after the whole header.
  void FinishTensor() {
    for (auto [field, name] : {std::pair{Field::kDtype, "dtype"}, std::pair{Field::kShape, "shape"},
                               std::pair{Field::kOffsets, "data_offsets"}}) {
      if (!(seen_fields_ & static_cast<int>(field))) {
        Fail(source_, TensorPrefix() + "has no \"" + name + "\"");
      }
    }
    size_t item_size = DtypeSize(tensor_.dtype);
    if (item_size == 0) {
      Fail(source_, TensorPrefix() + "has unsupported dtype " + Quoted(tensor_.dtype) +
                        " (supported: " + SupportedDtypes() + ")");
    }
    uint64_t bytes = CheckedByteSize(tensor_, item_size, source_);
    const uint64_t begin = tensor_.begin, end = tensor_.end;
    if (end < begin) {
      Fail(source_, TensorPrefix() + "has data_offsets " + Range(begin, end) +
                        " that end before they begin");
    }
    if (end > data_size_) {
      Fail(source_, TensorPrefix() + "has data_offsets " + Range(begin, end) +
                        " past the end of the " + std::to_string(data_size_) + "-byte data buffer");
    }
    if (end - begin != bytes) {
      Fail(source_, TensorPrefix() + "has data_offsets " + Range(begin, end) + " (" +
                        std::to_string(end - begin) + " bytes) but dtype " + tensor_.dtype +
                        " and shape " + ShapeText(tensor_.shape) + " need " +
                        std::to_string(bytes) + " bytes");
    }
    header_.tensors.push_back(std::move(tensor_));
  }

  const uint64_t data_size_;
  const std::string& source_;
  Header header_;
  State state_ = State::kStart;
  std::string key_;                      // the last top-level or metadata key
  std::unordered_set<std::string> names_;  // top-level keys seen so far
  TensorEntry tensor_;                   // the entry being read
  Field field_ = Field::kOther;          // the field whose value comes next
  int seen_fields_ = 0;                  // Field bits of the entry being read
  int offsets_seen_ = 0;
  uint64_t skip_depth_ = 0;
};

}  // namespace

Header ReadHeaderEntries(std::string_view json, uint64_t data_size, const std::string& source) {
  HeaderReader reader(data_size, source);
  // strict: nothing but whitespace may follow the object.
  if (!Json::sax_parse(json.data(), json.data() + json.size(), &reader,
                       Json::input_format_t::json, /*strict=*/true)) {
    Fail(source, "header is not valid JSON");  // every handler throws instead of returning false
  }
  return reader.Take();
}

}  // namespace distlm::safetensors::internal
