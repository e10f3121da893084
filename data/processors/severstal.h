// SeverstalBinaryClassDataProcessor: Kaggle's Severstal steel-defect data
// for UNet, as modelzoo reads it. data_dir holds train.csv (ImageId, ClassId,
// EncodedPixels) and train_images/; the rows of one class_id are the
// samples, the first train_test_split of them train and the rest eval. Each
// sample: the JPEG (1600 x 256) resized to image_shape (bicubic), its
// run-length mask (column-major, 1-based) resized (nearest), both tiled up
// to image_shape when it exceeds max_image_shape, normalized, and augmented
// in training (data/processors/unet_input.h). Defines: SeverstalOptions, decode_rle_mask,
// SeverstalSource, severstal_processor.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/processors/unet_input.h"
#include "data/registry.h"

namespace zoo::data {

struct SeverstalOptions : UNetInputOptions {
  double train_test_split = 0.0;
  int64_t class_id = 0;
  static const config::Schema<SeverstalOptions>& schema();
};

// Severstal's EncodedPixels ("start length ..." with 1-based starts counted
// down each column, or "-1" for none) as a uint8 (height, width) 0/1 mask.
// Throws std::invalid_argument on runs that are malformed or leave the image.
torch::Tensor decode_rle_mask(const std::string& encoded, int64_t height, int64_t width);

class SeverstalSource : public SampleSource {
 public:
  // Reads train.csv; throws std::runtime_error naming it on a bad file.
  SeverstalSource(const std::string& data_dir, const SeverstalOptions& options, bool training);
  int64_t num_samples() const override { return static_cast<int64_t>(rows_.size()); }
  std::string describe() const override { return data_dir_; }
  // input (B, C, H, W) float, labels as segmentation_labels gives them.
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  bool reads_epoch() const override { return augment_; }  // new augmentations each epoch

 private:
  struct Row {
    std::string image_id, encoded_pixels;
    int64_t line = 0;
  };
  std::pair<torch::Tensor, torch::Tensor> read_sample(int64_t id) const;
  std::string data_dir_;
  SeverstalOptions options_;
  bool augment_;
  std::vector<Row> rows_;
};

DataProcessor severstal_processor();

}  // namespace zoo::data
