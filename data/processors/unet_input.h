// What modelzoo's UNet data processors share (its UNetDataProcessor): the
// input keys, and each sample's steps: the image resized to image_shape (at
// most max_image_shape, bicubic), its class-id mask resized too, both tiled
// up to image_shape beyond max_image_shape, the image normalized, both
// augmented together in training, the mask shaped for the model's loss.
// Defines: UNetInputOptions, add_unet_input_fields, segmentation_labels,
// unet_sample, stack_samples, ImageMaskSource.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/image.h"
#include "data/loader.h"

namespace zoo::data {

struct UNetInputOptions : LoaderOptions {
  std::vector<int64_t> image_shape;  // (H, W, C)
  std::vector<int64_t> max_image_shape = {256, 1600};
  std::optional<std::string> normalize_data_method;
  bool augment_data = true;
  int64_t num_classes = 2;
  std::string loss = "bce";  // the model's: how labels are shaped
};

template <class T>
config::Schema<T>& add_unet_input_fields(config::Schema<T>& s) {
  using O = UNetInputOptions;
  return add_loader_fields(s)
      .field("image_shape", static_cast<std::vector<int64_t> T::*>(&O::image_shape),
             "(H, W, C) of the model's input; C is 1 (gray) or 3 (RGB).")
      .field("max_image_shape", static_cast<std::vector<int64_t> T::*>(&O::max_image_shape),
             "(H, W) the images are resized to at most; a larger image_shape tiles them.")
      .field("normalize_data_method", static_cast<std::optional<std::string> T::*>(&O::normalize_data_method),
             "zero_centered, zero_one, standard_score, or null.", config::if_set(config::one_of(kNormalizeMethods)))
      .field("augment_data", static_cast<bool T::*>(&O::augment_data),
             "Random flips, quarter turns and brightness, drawn anew each epoch.")
      .field("num_classes", static_cast<int64_t T::*>(&O::num_classes), "Classes of the model.")
      .field("loss", static_cast<std::string T::*>(&O::loss),
             "The model's loss, which decides the labels' layout (from the model section).",
             config::one_of({"bce", "multilabel_bce", "ssce", "ssce_dice"}))
      .hardware_only({"use_worker_cache", "duplicate_act_worker_data"}, "Cerebras cluster data staging")
      .ignored({"use_fast_dataloader"}, "zoo always uses its own loader")
      .ignored({"mixed_precision", "use_bfloat16"}, "the model's precision keys decide it")
      .validate([](const T& o, const auto& fail) {
        if (o.image_shape.size() != 3 || o.image_shape[0] <= 0 || o.image_shape[1] <= 0 ||
            (o.image_shape[2] != 1 && o.image_shape[2] != 3))
          fail("image_shape", "required: [H, W, C] with C 1 or 3");
        if (o.max_image_shape.size() != 2 || o.max_image_shape[0] <= 0 || o.max_image_shape[1] <= 0)
          fail("max_image_shape", "expected [H, W]");
        if (o.num_classes < 2) fail("num_classes", "expected at least 2 classes");
      });
}

// A class-id mask (1, H, W) shaped as the segmentation loss takes it: bce
// float (1, H, W); multilabel_bce float one-hot (num_classes, H, W); ssce
// and ssce_dice int64 (H, W).
torch::Tensor segmentation_labels(const torch::Tensor& mask, const std::string& loss, int64_t num_classes);

// One sample: image uint8 (C, H, W) and mask (1, H', W') class ids at any
// size; `resize_mask` resizes the mask to (height, width) (torchvision's
// tensor NEAREST or PIL's, by processor). `id` is the stream's sample id
// (epoch * samples + sample): the augmentation is drawn from it and the seed.
std::pair<torch::Tensor, torch::Tensor> unet_sample(
    const torch::Tensor& image, const torch::Tensor& mask, const UNetInputOptions& options, int64_t id,
    const std::function<torch::Tensor(const torch::Tensor&, int64_t, int64_t)>& resize_mask);

// Features {input: (B, C, H, W), labels} of samples (image, labels).
Features stack_samples(const std::vector<std::pair<torch::Tensor, torch::Tensor>>& samples);

// Samples that are (image file, mask file) pairs (Cityscapes, Inria), each
// read by the subclass and passed through unet_sample.
class ImageMaskSource : public SampleSource {
 public:
  int64_t num_samples() const override { return static_cast<int64_t>(pairs_.size()); }
  std::string describe() const override { return data_dir_; }
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  bool reads_epoch() const override { return options_.augment_data; }

 protected:
  ImageMaskSource(std::string data_dir, const UNetInputOptions& options)
      : data_dir_(std::move(data_dir)), options_(options) {}
  // A pair's image uint8 (C, H, W) and class-id mask uint8 (1, H, W); masks
  // are resized as PIL resizes them (nearest on pixel centres).
  virtual std::pair<torch::Tensor, torch::Tensor> read_pair(const std::string& image,
                                                            const std::string& mask) const = 0;
  const UNetInputOptions& options() const { return options_; }
  std::vector<std::pair<std::string, std::string>> pairs_;  // (image, mask), sorted by the subclass

 private:
  std::string data_dir_;
  UNetInputOptions options_;
};

}  // namespace zoo::data
