// Hdf5DataProcessor (modelzoo R1.x's UNet HDF5 data, as its
// create_hdf5_files.py writes it): sorted *.h5 files, each with attribute
// n_examples and groups example_<k> holding `image` (C, H, W) at
// image_shape, not normalized, and `label` (the class-id mask; (1, H, W) or
// (H, W), or one-hot (num_classes, H, W)). Each sample then goes through
// UNet's common pipeline (data/processors/unet_input.h: normalization, augmentation,
// labels shaped for the loss). Defines: UNetHdf5Options, UNetHdf5Source,
// unet_hdf5_processor, read_hdf5_floats.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "data/loader.h"
#include "data/processors/unet_input.h"
#include "data/registry.h"

namespace zoo::data {

struct UNetHdf5Options : UNetInputOptions {
  UNetHdf5Options() { max_image_shape = {1 << 20, 1 << 20}; }  // the files hold samples at image_shape
  static const config::Schema<UNetHdf5Options>& schema();
};

class UNetHdf5Source : public SampleSource {
 public:
  // Opens the files; std::runtime_error naming one without n_examples.
  UNetHdf5Source(const std::vector<std::string>& files, const UNetHdf5Options& options);
  ~UNetHdf5Source() override;
  int64_t num_samples() const override { return total_; }
  std::string describe() const override;
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  bool reads_epoch() const override { return options_.augment_data; }

 private:
  // Dataset `name` of example `k` in file `f`, as float32 with its shape.
  torch::Tensor read(size_t f, int64_t k, const std::string& name) const;
  UNetHdf5Options options_;
  std::vector<std::string> paths_;
  std::vector<int64_t> file_ids_, firsts_;  // HDF5 ids; each file's first sample
  int64_t total_ = 0;
};

DataProcessor unet_hdf5_processor();

// Dataset `name` of the open HDF5 file `file_id` as float32 with its shape;
// std::runtime_error naming `where` when it is missing or not numbers.
torch::Tensor read_hdf5_floats(int64_t file_id, const std::string& name, const std::string& where);

}  // namespace zoo::data
