// ByteTextDataProcessor: plain *.txt files read as bytes (token id = byte
// value, vocabulary 256), cut into windows of max_sequence_length + 1.
// Defines: ByteTextOptions, ByteTextSource, byte_text_processor.
#pragma once

#include <string>
#include <vector>

#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

struct ByteTextOptions : LoaderOptions {
  int64_t max_sequence_length = 128;
  static const config::Schema<ByteTextOptions>& schema();
};

// All files concatenated; sample i is tokens [i*T, i*T + T] (inputs, then
// labels shifted by one), every position counted in the loss.
class ByteTextSource : public LmSampleSource {
 public:
  ByteTextSource(std::vector<std::string> files, int64_t sequence_length, std::string description);
  int64_t num_samples() const override;
  int64_t sequence_length() const override { return seq_len_; }
  void read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const override;
  std::string describe() const override { return description_; }

 private:
  std::string bytes_;
  int64_t seq_len_;
  std::string description_;
};

DataProcessor byte_text_processor();

}  // namespace zoo::data
