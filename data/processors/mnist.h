// MNISTDataProcessor: MNIST in its IDX files (as torchvision stores them,
// raw or gzipped), for FC-MNIST. Defines: MnistOptions, MnistSource,
// read_idx, mnist_processor.
#pragma once

#include <string>
#include <vector>

#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

struct MnistOptions : LoaderOptions {
  std::string split;  // "train" or "test"; default: train for train_input, test for eval_input
  bool drop_last_batch = true;
  bool to_float16 = false;
  static const config::Schema<MnistOptions>& schema();
};

// An IDX file: big-endian magic (0, 0, type 0x08 = ubyte, rank), then the
// dims, then the values. Throws std::runtime_error naming the file.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;
};
IdxArray read_idx(const std::string& path);

// Images (n, 28, 28) and labels (n): batches of "input" float (B, 1, 28, 28),
// scaled to [0, 1] and normalized with MNIST's mean 0.1307 and std 0.3081 (as
// torchvision's ToTensor + Normalize in modelzoo), and "labels" int64 (B).
class MnistSource : public SampleSource {
 public:
  MnistSource(const std::string& images_file, const std::string& labels_file);
  int64_t num_samples() const override { return static_cast<int64_t>(labels_.size()); }
  std::string describe() const override { return images_file_; }
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;

 private:
  std::string images_file_;
  int64_t pixels_ = 0;  // per image
  std::vector<int64_t> image_shape_;
  std::vector<uint8_t> images_, labels_;
};

DataProcessor mnist_processor();

}  // namespace zoo::data
