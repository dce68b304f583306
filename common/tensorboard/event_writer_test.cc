// The event file's bytes against independent references: CRC-32C's check value ("123456789"
// gives 0xE3069283) and RFC 3720's 32 zero bytes (0x8A9136AA); the record that TensorBoard's own
// reader tests decode (tensorboard/data/server/tf_record.rs, "test_success": a file-version
// event, 40 bytes); a Summary.Value encoded by hand from summary.proto's field numbers; then a
// written file read back record by record, both CRCs checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/tensorboard/crc32c.h"
#include "common/tensorboard/event_writer.h"

namespace distlm::tensorboard {
namespace {

std::string Hex(const std::string& s) {
  std::string out;
  char b[4];
  for (unsigned char c : s) {
    std::snprintf(b, sizeof(b), "%02x ", c);
    out += b;
  }
  return out;
}

TEST(EventWriterTest, Crc32cCheckValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
}

TEST(EventWriterTest, FileVersionRecordIsTensorBoardsGolden) {
  // wall_time's 8 bytes as the golden record has them.
  const unsigned char wall[8] = {0x00, 0x00, 0x80, 0x38, 0x99, 0xd6, 0xd7, 0x41};
  double wall_time;
  std::memcpy(&wall_time, wall, 8);
  const std::string want = std::string("\x18\x00\x00\x00\x00\x00\x00\x00", 8) + "\xa3\x7f\x4b\x22" +
                           std::string("\x09\x00\x00\x80\x38\x99\xd6\xd7\x41\x1a\x0d", 11) + "brain.Event:2" +
                           "\x12\x4b\x36\xab";
  const std::string got = FramedRecord(FileVersionEvent(wall_time));
  EXPECT_EQ(Hex(got), Hex(want));
}

TEST(EventWriterTest, ScalarIsSummaryValueWithSimpleValue) {
  // Event{wall_time 1.5, step 300, summary{value{tag "loss", simple_value 0.5}}}, encoded by hand
  // from the field numbers: 09 <1.5 as 8 bytes> | 10 ac 02 | 2a 0d 0a 0b (0a 04 "loss" 15 00 00 00 3f)
  const std::string value = std::string("\x0a\x04", 2) + "loss" + std::string("\x15\x00\x00\x00\x3f", 5);
  const std::string want = std::string("\x09\x00\x00\x00\x00\x00\x00\xf8\x3f", 9) + "\x10\xac\x02" + "\x2a\x0d" +
                           "\x0a\x0b" + value;
  EXPECT_EQ(Hex(ScalarsEvent(1.5, 300, {{"loss", 0.5f}})), Hex(want));
  // proto3: a zero wall time and step are the defaults, left out; an empty summary is still there.
  EXPECT_EQ(Hex(ScalarsEvent(0.0, 0, {})), Hex(std::string("\x2a\x00", 2)));
}

TEST(EventWriterTest, TextIsWhatProtobufWrites) {
  // The bytes tensorboard 2.21.0's own protobuf classes serialize (Python, event_pb2) for
  // Event{wall_time 1.5, step 3, summary{value{tag "args", tensor{DT_STRING, shape [1],
  // string_val "| a | b |"}, metadata{plugin_data{plugin_name "text"}}}}}.
  const std::string want =
      "09000000000000f83f10032a270a250a04617267734213080712041202080142097c2061207c2062207c4a080a060a0474657874";
  std::string got = Hex(TextEvent(1.5, 3, "args", "| a | b |"));
  got.erase(std::remove(got.begin(), got.end(), ' '), got.end());
  EXPECT_EQ(got, want);
}

TEST(EventWriterTest, WrittenFileReadsBackRecordByRecord) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/tb_events";
  std::string path;
  {
    EventWriter w(dir);
    path = w.path();
    EXPECT_NE(path.find("/events.out.tfevents."), std::string::npos) << path;
    w.Add(1, {{"train/loss", 0.69f}, {"train/lr", 2e-5f}});
    w.Add(2, {{"train/loss", 0.5f}});
  }
  const std::vector<std::string> records = ReadRecords(path);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  EXPECT_NE(records[1].find("train/lr"), std::string::npos);
  // All but the wall time (bytes 1..8), as ScalarsEvent encodes it.
  EXPECT_EQ(records[2].substr(9), ScalarsEvent(1.0, 2, {{"train/loss", 0.5f}}).substr(9));
  // A flipped payload byte, and a file cut inside a record, are named.
  std::string bytes = ReadFile(path);
  bytes[bytes.size() - 6] ^= 1;
  WriteFileAtomically(path, bytes);
  try {
    ReadRecords(path);
    ADD_FAILURE() << "a flipped byte was not noticed";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(": record 2 at byte "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("payload's CRC does not match"), std::string::npos) << e.what();
  }
  WriteFileAtomically(path, bytes.substr(0, bytes.size() - 2));
  try {
    ReadRecords(path);
    ADD_FAILURE() << "a cut file was not noticed";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("the file ends inside it"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace distlm::tensorboard
