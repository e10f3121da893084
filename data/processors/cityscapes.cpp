// Implementation of data/processors/cityscapes.h.
#include "data/processors/cityscapes.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <stdexcept>

#include "data/image.h"

namespace zoo::data {

namespace fs = std::filesystem;

const config::Schema<CityscapesOptions>& CityscapesOptions::schema() {
  using O = CityscapesOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (CityscapesDataProcessor)",
                         "Cityscapes images (leftImg8bit) and fine label ids (gtFine) for UNet.");
    add_unet_input_fields(sc);
    return sc;
  }();
  return s;
}

int64_t cityscapes_train_id(int64_t label_id) {
  // cityscapesScripts' labels with ignoreInEval mapped to 0, as modelzoo's lookup table.
  static const std::array<int64_t, 34> table = {0, 0, 0, 0, 0, 0,  0,  1,  2,  0,  0,  3,  4, 5, 0,  0,  0,
                                                6, 0, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 0, 17, 18, 19};
  return label_id >= 0 && label_id < int64_t(table.size()) ? table[label_id] : 0;
}

CityscapesSource::CityscapesSource(const std::string& data_dir, const std::string& split, const CityscapesOptions& o)
    : ImageMaskSource(data_dir, o) {
  const fs::path images = fs::path(data_dir) / "leftImg8bit" / split, labels = fs::path(data_dir) / "gtFine" / split;
  if (!fs::is_directory(images))
    throw std::runtime_error(images.string() +
                             ": no such directory (Cityscapes keeps leftImg8bit/<split>/<city>/ "
                             "and gtFine/<split>/<city>/ under data_dir)");
  const std::string suffix = "_leftImg8bit.png";
  for (const auto& city : fs::directory_iterator(images)) {
    if (!city.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(city.path())) {
      const std::string name = f.path().filename().string();
      if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const fs::path label =
          labels / city.path().filename() / (name.substr(0, name.size() - suffix.size()) + "_gtFine_labelIds.png");
      if (!fs::is_regular_file(label))
        throw std::runtime_error(f.path().string() + ": no label file " + label.string());
      pairs_.emplace_back(f.path().string(), label.string());
    }
  }
  std::sort(pairs_.begin(), pairs_.end());  // torchvision lists directories unsorted; modelzoo sorts
  if (pairs_.empty()) throw std::runtime_error(images.string() + ": no *" + suffix + " images");
}

std::pair<torch::Tensor, torch::Tensor> CityscapesSource::read_pair(const std::string& image_path,
                                                                    const std::string& label_path) const {
  const torch::Tensor label_ids = read_image(label_path, 1);
  // Ids -> classes before resizing: the same as after, since the resize is nearest.
  static const torch::Tensor lut = [] {
    torch::Tensor t = torch::empty({256}, torch::kByte);
    for (int64_t v = 0; v < 256; ++v) t[v] = cityscapes_train_id(v);
    return t;
  }();
  return {read_image(image_path, options().image_shape[2]),
          lut.index_select(0, label_ids.reshape({-1}).to(torch::kLong)).view(label_ids.sizes())};
}

namespace {

std::unique_ptr<DataLoader> open_cityscapes(const CityscapesOptions& given, const config::Origin& at) {
  return open_map_style(given, at, "Cityscapes' leftImg8bit/ and gtFine/", [&](const std::string& dir, bool eval) {
    return std::make_shared<CityscapesSource>(dir, eval ? "val" : "train", given);
  });
}

}  // namespace

DataProcessor cityscapes_processor() {
  return make_data_processor<CityscapesOptions>("CityscapesDataProcessor",
                                                "Cityscapes fine segmentation (20 classes), for UNet.",
                                                {"input", "labels"}, open_cityscapes);
}

}  // namespace zoo::data
