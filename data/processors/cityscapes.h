// CityscapesDataProcessor: Cityscapes' fine annotations for UNet, as
// modelzoo reads them through torchvision's Cityscapes dataset:
// data_dir/leftImg8bit/<split>/<city>/<name>_leftImg8bit.png and
// data_dir/gtFine/<split>/<city>/<name>_gtFine_labelIds.png, in sorted
// order; train_input reads split train, eval_input val. Label ids map to 20
// classes with modelzoo's table (the ignoreInEval classes become 0); masks
// are resized as PIL resizes (nearest). The rest is UNet's common sample
// pipeline (data/processors/unet_input.h). Defines: CityscapesOptions,
// cityscapes_train_id, CityscapesSource, cityscapes_processor.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "data/loader.h"
#include "data/processors/unet_input.h"
#include "data/registry.h"

namespace zoo::data {

struct CityscapesOptions : UNetInputOptions {
  CityscapesOptions() { max_image_shape = {1024, 2048}, num_classes = 20, loss = "ssce"; }
  static const config::Schema<CityscapesOptions>& schema();
};

// Cityscapes' label id (0-33) -> modelzoo's class (0-19); other ids -> 0.
int64_t cityscapes_train_id(int64_t label_id);

class CityscapesSource : public ImageMaskSource {
 public:
  // Lists `split`'s image and label pairs; std::runtime_error naming the
  // directory when there are none or an image has no label file.
  CityscapesSource(const std::string& data_dir, const std::string& split, const CityscapesOptions& options);

 protected:
  std::pair<torch::Tensor, torch::Tensor> read_pair(const std::string& image, const std::string& mask) const override;
};

DataProcessor cityscapes_processor();

}  // namespace zoo::data
