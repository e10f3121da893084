// InriaAerialDataProcessor: the Inria Aerial Image Labeling data for UNet,
// as modelzoo reads it: data_dir/<split>/images/*.tif with their building
// masks (0 or 255) under the same names in data_dir/<split>/gt/, sorted;
// train_input reads split train, eval_input val. The images are used at
// their size, which must be image_shape's (modelzoo's resize_inria_files.py
// prepares them); masks become classes 0 and 1. The rest is UNet's common
// sample pipeline (data/processors/unet_input.h). Defines: InriaOptions, InriaSource,
// inria_processor.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "data/loader.h"
#include "data/processors/unet_input.h"
#include "data/registry.h"

namespace zoo::data {

struct InriaOptions : UNetInputOptions {
  InriaOptions() { max_image_shape = {1 << 20, 1 << 20}; }  // never resized: the files come at image_shape
  bool overfit = false;
  static const config::Schema<InriaOptions>& schema();
};

class InriaSource : public ImageMaskSource {
 public:
  // Lists `split`'s images and masks; std::runtime_error naming the
  // directory when there are none or an image has no mask.
  InriaSource(const std::string& data_dir, const std::string& split, const InriaOptions& options);

 protected:
  std::pair<torch::Tensor, torch::Tensor> read_pair(const std::string& image, const std::string& mask) const override;
};

DataProcessor inria_processor();

}  // namespace zoo::data
