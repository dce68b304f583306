// TensorBoard scalars and text without TensorFlow: an events.out.tfevents.* file that
// `tensorboard --logdir` reads while the run writes it. A file is TFRecord records (length,
// masked CRC-32C of the length, payload, masked CRC-32C of the payload; little-endian), each
// payload one Event message: the first {wall_time, file_version "brain.Event:2"}, then
// {wall_time, step, summary {value {tag, simple_value}...}} per call (or a text summary). The
// Events are protobuf messages (event.proto, TensorBoard's field numbers; protobuf's lite
// runtime serializes them); the framing and CRC are here. docs/design/trace_and_tensorboard.md
// describes the format and where each part comes from.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace distlm::tensorboard {

using Scalars = std::vector<std::pair<std::string, float>>;

// One TFRecord record around `payload`.
std::string FramedRecord(const std::string& payload);
// The Event payloads.
std::string FileVersionEvent(double wall_time);
std::string ScalarsEvent(double wall_time, int64_t step, const Scalars& scalars);
// A text summary (TensorBoard's Text tab renders it as Markdown).
std::string TextEvent(double wall_time, int64_t step, const std::string& tag, const std::string& text);

// The payloads of a file of TFRecord records, both CRCs checked: a UserError naming the file,
// the record and its offset when one fails or the file ends inside a record.
std::vector<std::string> ReadRecords(const std::string& path);

class EventWriter {
 public:
  // Creates dir (and its parents) and dir/events.out.tfevents.<seconds>.<host>.<pid>, and writes
  // the file-version record. UserError naming the path when it cannot.
  explicit EventWriter(const std::string& dir);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // One Event at `step` with every scalar, flushed (a running TensorBoard sees it at once).
  void Add(int64_t step, const Scalars& scalars);
  // One text summary at `step`, flushed.
  void AddText(int64_t step, const std::string& tag, const std::string& text);
  const std::string& path() const { return path_; }

 private:
  void Write(const std::string& record);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace distlm::tensorboard
