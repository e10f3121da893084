// modelzoo's `transforms:` lists for vision classification (torchvision
// transforms on PIL images, then tensors), parsed once and applied per
// sample with a random stream drawn from the sample's seed, so a resumed run
// sees the same augmentations. Defines: TransformSpec, TransformPipeline.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "configs/schema/schema.h"

namespace zoo::data {

// One `transforms` entry: resize, center_crop, random_resized_crop,
// random_horizontal_flip, random_vertical_flip, to_tensor, normalize, and
// expand_to_square (LLaVA's: the image centred on a square of background_color).
struct TransformSpec {
  std::string name;
  std::optional<config::NumberList> size;                // [H, W], or one number (resize: the shorter side)
  config::NumberList scale{{0.08, 1.0}};                 // random_resized_crop: share of the area
  config::NumberList ratio{{3.0 / 4.0, 4.0 / 3.0}};      // random_resized_crop: aspect ratio range
  std::string interpolation = "bilinear";                // resize, random_resized_crop
  double p = 0.5;                                        // flips
  std::optional<config::NumberList> mean, std;           // normalize, per channel
  std::optional<std::vector<int64_t>> background_color;  // expand_to_square: the padding's RGB
  static const config::Schema<TransformSpec>& schema();
};

class TransformPipeline {
 public:
  TransformPipeline() = default;
  explicit TransformPipeline(std::vector<TransformSpec> specs) : specs_(std::move(specs)) {}
  // uint8 (C, H, W) -> the pipeline's output: float after to_tensor /
  // normalize, else uint8. `seed` draws every random choice of this sample.
  torch::Tensor apply(torch::Tensor image, uint64_t seed) const;
  const std::vector<TransformSpec>& specs() const { return specs_; }

 private:
  std::vector<TransformSpec> specs_;
};

// torchvision's RandomResizedCrop.get_params: (top, left, height, width) of
// a crop covering `scale` of the area at an aspect ratio within `ratio`
// (log-uniform), from up to 10 tries, else the central crop clamped to the ratio.
struct CropBox {
  int64_t top, left, height, width;
};
CropBox random_resized_crop_box(int64_t height, int64_t width, const std::vector<double>& scale,
                                const std::vector<double>& ratio, uint64_t seed);

}  // namespace zoo::data
