// Implementation of data/processors/inria.h.
#include "data/processors/inria.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "data/image.h"

namespace zoo::data {

namespace fs = std::filesystem;

const config::Schema<InriaOptions>& InriaOptions::schema() {
  using O = InriaOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (InriaAerialDataProcessor)",
                         "Inria aerial images and building masks (<split>/images, <split>/gt) for UNet.");
    add_unet_input_fields(sc)
        .field("overfit", &O::overfit, "modelzoo's debugging subset: not supported by zoo (false only).")
        .ignored({"train_test_split"}, "InriaAerialDataProcessor reads its train and val folders")
        .ignored({"overfit_num_batches", "overfit_indices"}, "used with overfit only")
        .validate([](const O& o, const auto& fail) {
          if (o.overfit) fail("overfit", "not supported by zoo (modelzoo's debugging subset)");
        });
    return sc;
  }();
  return s;
}

InriaSource::InriaSource(const std::string& data_dir, const std::string& split, const InriaOptions& o)
    : ImageMaskSource(data_dir, o) {
  const fs::path images = fs::path(data_dir) / split / "images", masks = fs::path(data_dir) / split / "gt";
  if (!fs::is_directory(images))
    throw std::runtime_error(images.string() +
                             ": no such directory (Inria keeps <split>/images/ and <split>/gt/ "
                             "under data_dir)");
  for (const auto& f : fs::directory_iterator(images)) {
    if (!f.is_regular_file()) continue;
    const fs::path mask = masks / f.path().filename();
    if (!fs::is_regular_file(mask)) throw std::runtime_error(f.path().string() + ": no mask " + mask.string());
    pairs_.emplace_back(f.path().string(), mask.string());
  }
  std::sort(pairs_.begin(), pairs_.end());
  if (pairs_.empty()) throw std::runtime_error(images.string() + ": no images");
}

std::pair<torch::Tensor, torch::Tensor> InriaSource::read_pair(const std::string& image_path,
                                                               const std::string& mask_path) const {
  const std::vector<int64_t>& shape = options().image_shape;
  const torch::Tensor image = read_image(image_path, shape[2]);
  if (image.size(1) != shape[0] || image.size(2) != shape[1])
    throw std::runtime_error(image_path + ": " + std::to_string(image.size(2)) + " x " + std::to_string(image.size(1)) +
                             " pixels, but image_shape is " + std::to_string(shape[1]) + " x " +
                             std::to_string(shape[0]) + " (modelzoo's resize_inria_files.py resizes the files)");
  // Buildings are 255, as modelzoo's zero_one scaling of the mask makes them 1.
  const torch::Tensor mask = (read_image(mask_path, 1) >= 128).to(torch::kByte);
  if (mask.sizes().slice(1) != image.sizes().slice(1))
    throw std::runtime_error(mask_path + ": the mask's size differs from its image's");
  return {image, mask};
}

namespace {

std::unique_ptr<DataLoader> open_inria(const InriaOptions& given, const config::Origin& at) {
  return open_map_style(given, at, "Inria's train/ and val/", [&](const std::string& dir, bool eval) {
    return std::make_shared<InriaSource>(dir, eval ? "val" : "train", given);
  });
}

}  // namespace

DataProcessor inria_processor() {
  return make_data_processor<InriaOptions>("InriaAerialDataProcessor",
                                           "Inria aerial building segmentation (TIFF images and masks), for UNet.",
                                           {"input", "labels"}, open_inria);
}

}  // namespace zoo::data
