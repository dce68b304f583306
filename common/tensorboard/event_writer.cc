#include "common/tensorboard/event_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/tensorboard/crc32c.h"

namespace distlm::tensorboard {
namespace {

void Varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

template <typename T>
void LittleEndian(std::string& out, T v) {  // x86-64 and every platform LibTorch supports here
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

// A length-delimited field (wire type 2).
void Bytes(std::string& out, int field, const std::string& body) {
  Varint(out, static_cast<uint64_t>(field) << 3 | 2);
  Varint(out, body.size());
  out += body;
}

// Event{wall_time, step, summary}: the envelope of every event but the file version.
std::string SummaryEvent(double wall_time, int64_t step, const std::string& summary) {
  std::string e;
  e.push_back(0x09);  // Event.wall_time: field 1, fixed64
  LittleEndian<double>(e, wall_time);
  if (step != 0) {  // proto3: a zero step is the default, left out
    e.push_back(0x10);  // Event.step: field 2, varint (two's complement)
    Varint(e, static_cast<uint64_t>(step));
  }
  Bytes(e, 5, summary);  // Event.summary
  return e;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string FramedRecord(const std::string& payload) {
  std::string out;
  LittleEndian<uint64_t>(out, payload.size());
  LittleEndian<uint32_t>(out, MaskedCrc32c(out.data(), 8));
  out += payload;
  LittleEndian<uint32_t>(out, MaskedCrc32c(payload.data(), payload.size()));
  return out;
}

std::string FileVersionEvent(double wall_time) {
  std::string e;
  e.push_back(0x09);  // Event.wall_time: field 1, fixed64
  LittleEndian<double>(e, wall_time);
  Bytes(e, 3, "brain.Event:2");  // Event.file_version
  return e;
}

std::string ScalarsEvent(double wall_time, int64_t step, const Scalars& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    Bytes(v, 1, tag);   // Summary.Value.tag
    v.push_back(0x15);  // Summary.Value.simple_value: field 2, fixed32
    LittleEndian<float>(v, value);
    Bytes(summary, 1, v);  // Summary.value (repeated)
  }
  return SummaryEvent(wall_time, step, summary);
}

std::string TextEvent(double wall_time, int64_t step, const std::string& tag, const std::string& text) {
  // What the text plugin reads: a string tensor of shape [1] whose metadata names the plugin
  // (field numbers of tensorboard/compat/proto/summary.proto, tensor.proto, tensor_shape.proto).
  std::string plugin_data, metadata, dim, shape, tensor, v, summary;
  Bytes(plugin_data, 1, "text");      // PluginData.plugin_name (content: empty, version 0)
  Bytes(metadata, 1, plugin_data);    // SummaryMetadata.plugin_data
  dim.push_back(0x08);                // TensorShapeProto.Dim.size: field 1, varint
  Varint(dim, 1);
  Bytes(shape, 2, dim);               // TensorShapeProto.dim
  tensor.push_back(0x08);             // TensorProto.dtype: field 1, varint
  Varint(tensor, 7);                  // DT_STRING
  Bytes(tensor, 2, shape);            // TensorProto.tensor_shape
  Bytes(tensor, 8, text);             // TensorProto.string_val
  Bytes(v, 1, tag);                   // Summary.Value.tag (fields in number order, as protobuf writes them)
  Bytes(v, 8, tensor);                // Summary.Value.tensor
  Bytes(v, 9, metadata);              // Summary.Value.metadata
  Bytes(summary, 1, v);
  return SummaryEvent(wall_time, step, summary);
}

std::vector<std::string> ReadRecords(const std::string& path) {
  const std::string bytes = ReadFile(path);
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < bytes.size()) {
    const std::string where = path + ": record " + std::to_string(records.size()) + " at byte " + std::to_string(pos);
    if (pos + 12 > bytes.size()) throw UserError(where + ": the file ends inside its header");
    uint64_t n;
    uint32_t crc;
    std::memcpy(&n, bytes.data() + pos, 8);
    std::memcpy(&crc, bytes.data() + pos + 8, 4);
    if (crc != MaskedCrc32c(bytes.data() + pos, 8)) throw UserError(where + ": its length's CRC does not match");
    if (n > bytes.size() - pos - 12 || bytes.size() - pos - 12 - n < 4) throw UserError(where + ": the file ends inside it");
    std::memcpy(&crc, bytes.data() + pos + 12 + n, 4);
    if (crc != MaskedCrc32c(bytes.data() + pos + 12, n)) throw UserError(where + ": its payload's CRC does not match");
    records.push_back(bytes.substr(pos + 12, n));
    pos += 12 + n + 4;
  }
  return records;
}

EventWriter::EventWriter(const std::string& dir) {
  MakeDirs(dir);
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const double now = Now();
  char name[512];
  std::snprintf(name, sizeof(name), "/events.out.tfevents.%010lld.%s.%d", static_cast<long long>(now), host,
                static_cast<int>(getpid()));
  path_ = dir + name;
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) throw UserError(path_ + ": cannot create the TensorBoard event file (" + std::strerror(errno) + ")");
  Write(FramedRecord(FileVersionEvent(now)));
}

EventWriter::~EventWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void EventWriter::Add(int64_t step, const Scalars& scalars) { Write(FramedRecord(ScalarsEvent(Now(), step, scalars))); }

void EventWriter::AddText(int64_t step, const std::string& tag, const std::string& text) {
  Write(FramedRecord(TextEvent(Now(), step, tag, text)));
}

void EventWriter::Write(const std::string& record) {
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0) {
    throw UserError(path_ + ": cannot write the TensorBoard event file (" + std::strerror(errno) + ")");
  }
}

}  // namespace distlm::tensorboard
