// TensorBoard event files: TFRecord framing (length, masked CRC32C of the
// length, payload, masked CRC32C of the payload) around protobuf Event
// messages. Defines: EventWriter, masked_crc32c, read_event_records.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace zoo::tensorboard {

// CRC32C (Castagnoli) of `data`, masked as TFRecord does.
uint32_t masked_crc32c(const void* data, size_t size);

class EventWriter {
 public:
  // Creates `dir` and events.out.tfevents.<unix time>.<host>.zoo in it.
  // Each call throws std::runtime_error naming the file and the reason
  // (e.g. a full disk) when it cannot write.
  explicit EventWriter(const std::string& dir);
  void add_scalar(const std::string& tag, double value, int64_t step);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& payload);
  void check();
  std::string path_;
  std::ofstream out_;
};

struct ScalarRecord {
  std::string tag;
  float value;
  int64_t step;
};
// Reads an event file back, checking every record's CRCs; throws
// std::runtime_error naming the file and offset of a bad record.
std::vector<ScalarRecord> read_event_records(const std::string& path);

}  // namespace zoo::tensorboard
