// Implementation of data/processors/unet_input.h.
#include "data/processors/unet_input.h"

#include "data/splitmix.h"

namespace zoo::data {

torch::Tensor segmentation_labels(const torch::Tensor& mask, const std::string& loss, int64_t num_classes) {
  if (loss == "bce") return mask.to(torch::kFloat);
  const torch::Tensor ids = mask.squeeze(0).to(torch::kLong);
  if (loss == "multilabel_bce") return torch::one_hot(ids, num_classes).permute({2, 0, 1}).to(torch::kFloat);
  return ids;
}

std::pair<torch::Tensor, torch::Tensor> unet_sample(
    const torch::Tensor& image_in, const torch::Tensor& mask_in, const UNetInputOptions& o, int64_t id,
    const std::function<torch::Tensor(const torch::Tensor&, int64_t, int64_t)>& resize_mask) {
  const std::vector<int64_t>& shape = o.image_shape;
  const int64_t height = std::min(shape[0], o.max_image_shape[0]), width = std::min(shape[1], o.max_image_shape[1]);
  torch::Tensor image = tile_image(resize_image(image_in, height, width, "bicubic"), shape[0], shape[1]);
  torch::Tensor mask = tile_image(resize_mask(mask_in, height, width), shape[0], shape[1]);
  image = normalize_image(image, o.normalize_data_method.value_or(""));
  if (o.augment_data) {
    // Drawn from the seed, the epoch and the sample: the same on a resumed run.
    const auto a =
        SegmentationAugment::draw(SplitMix64::mix(uint64_t(o.shuffle_seed)) ^ uint64_t(id), shape[0] == shape[1]);
    image = a.image(image), mask = a.mask(mask);
  }
  return {image, segmentation_labels(mask, o.loss, o.num_classes)};
}

Features stack_samples(const std::vector<std::pair<torch::Tensor, torch::Tensor>>& samples) {
  std::vector<torch::Tensor> images, labels;
  for (const auto& [image, label] : samples) images.push_back(image), labels.push_back(label);
  return {{"input", torch::stack(images)}, {"labels", torch::stack(labels)}};
}

Features ImageMaskSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t>) const {
  std::vector<std::pair<torch::Tensor, torch::Tensor>> samples;
  for (int64_t id : ids) {
    const auto& [image_path, mask_path] = pairs_[id % num_samples()];
    const auto [image, mask] = read_pair(image_path, mask_path);
    samples.push_back(unet_sample(image, mask, options_, id, [](const torch::Tensor& m, int64_t h, int64_t w) {
      return resize_image(m, h, w, "nearest");
    }));
  }
  return stack_samples(samples);
}

}  // namespace zoo::data
