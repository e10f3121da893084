// SkmDataProcessor: SKM-TEA knee MRI volumes for 3D UNet, as modelzoo reads
// them: data_dir/annotations/v1.0.0/<split>.json lists image_files/*.h5,
// each holding echo1 and echo2 volumes (X, Y, Z) and `seg`, one-hot tissue
// masks (X, Y, Z, 6). The input is one echo, both as two channels
// (echo1-echo2-mc) or their root sum of squares, as (C, Z, X, Y), each
// channel normalized; the labels are class ids (Z, X, Y): 0 background and
// the tissues in order (aggregate_cartilage: patellar, femoral, tibial,
// meniscus). No resizing or augmentation, as modelzoo's. Defines:
// SkmOptions, SkmSource, skm_processor.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

struct SkmOptions : LoaderOptions {
  std::vector<int64_t> image_shape;  // (D, H, W)
  std::string echo_type = "echo1";
  bool aggregate_cartilage = true;
  std::optional<std::string> normalize_data_method;
  int64_t num_classes = 5;
  std::string loss = "ssce_dice";
  static const config::Schema<SkmOptions>& schema();
};

class SkmSource : public SampleSource {
 public:
  SkmSource(const std::string& data_dir, const std::string& split, const SkmOptions& options);
  int64_t num_samples() const override { return static_cast<int64_t>(files_.size()); }
  std::string describe() const override { return data_dir_; }
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;

 private:
  std::string data_dir_;
  SkmOptions options_;
  std::vector<std::string> files_;
};

DataProcessor skm_processor();

}  // namespace zoo::data
