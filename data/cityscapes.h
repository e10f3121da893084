// CityscapesDataProcessor: Cityscapes' fine annotations for UNet, as
// modelzoo reads them through torchvision's Cityscapes dataset:
// data_dir/leftImg8bit/<split>/<city>/<name>_leftImg8bit.png and
// data_dir/gtFine/<split>/<city>/<name>_gtFine_labelIds.png, in sorted
// order; train_input reads split train, eval_input val. Label ids map to 20
// classes with modelzoo's table (the ignoreInEval classes become 0); masks
// are resized as PIL resizes (nearest). The rest is UNet's common sample
// pipeline (data/unet_input.h). Defines: CityscapesOptions,
// cityscapes_train_id, CityscapesSource, cityscapes_processor.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "data/loader.h"
#include "data/registry.h"
#include "data/unet_input.h"

namespace zoo::data {

struct CityscapesOptions : UNetInputOptions {
  CityscapesOptions() { max_image_shape = {1024, 2048}, num_classes = 20, loss = "ssce"; }
  static const config::Schema<CityscapesOptions>& schema();
};

// Cityscapes' label id (0-33) -> modelzoo's class (0-19); other ids -> 0.
int64_t cityscapes_train_id(int64_t label_id);

class CityscapesSource : public SampleSource {
 public:
  // Lists `split`'s image and label pairs; std::runtime_error naming the
  // directory when there are none or an image has no label file.
  CityscapesSource(const std::string& data_dir, const std::string& split, const CityscapesOptions& options);
  int64_t num_samples() const override { return static_cast<int64_t>(pairs_.size()); }
  std::string describe() const override { return data_dir_; }
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  bool reads_epoch() const override { return options_.augment_data; }

 private:
  std::string data_dir_;
  CityscapesOptions options_;
  std::vector<std::pair<std::string, std::string>> pairs_;  // (image, labelIds)
};

DataProcessor cityscapes_processor();

}  // namespace zoo::data
