#include "common/tensorboard/event_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/tensorboard/crc32c.h"
#include "common/tensorboard/event.pb.h"

namespace distlm::tensorboard {
namespace {

template <typename T>
void LittleEndian(std::string& out, T v) {  // x86-64 and every platform LibTorch supports here
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

std::string Serialized(const proto::Event& e) {
  std::string out;
  if (!e.SerializeToString(&out)) throw UserError("TensorBoard event: protobuf could not serialize it");
  return out;
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
  proto::Event e;
  e.set_wall_time(wall_time);
  e.set_file_version("brain.Event:2");
  return Serialized(e);
}

std::string ScalarsEvent(double wall_time, int64_t step, const Scalars& scalars) {
  proto::Event e;
  e.set_wall_time(wall_time);
  e.set_step(step);
  proto::Summary* summary = e.mutable_summary();
  for (const auto& [tag, value] : scalars) {
    proto::Summary::Value* v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(value);
  }
  return Serialized(e);
}

std::string TextEvent(double wall_time, int64_t step, const std::string& tag, const std::string& text) {
  // What the text plugin reads: a string tensor of shape [1] whose metadata names the plugin.
  proto::Event e;
  e.set_wall_time(wall_time);
  e.set_step(step);
  proto::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  proto::TensorProto* tensor = v->mutable_tensor();
  tensor->set_dtype(7);  // DT_STRING
  tensor->mutable_tensor_shape()->add_dim()->set_size(1);
  tensor->add_string_val(text);
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  return Serialized(e);
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
