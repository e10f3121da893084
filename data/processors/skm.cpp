// Implementation of data/processors/skm.h with the HDF5 C API.
#include "data/processors/skm.h"

#include <hdf5.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/image.h"
#include "data/processors/unet_hdf5.h"
#include "data/processors/unet_input.h"

namespace zoo::data {

const config::Schema<SkmOptions>& SkmOptions::schema() {
  using O = SkmOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (SkmDataProcessor)",
                         "SKM-TEA knee MRI volumes and tissue masks (image_files/*.h5), for 3D UNet.");
    add_loader_fields(sc)
        .field("image_shape", &O::image_shape, "(D, H, W) of the volumes (Z, X, Y of the files).")
        .field("echo_type", &O::echo_type,
               "echo1, echo2, echo1-echo2-mc (both, as two channels) or "
               "root_sum_of_squares.",
               config::one_of({"echo1", "echo2", "echo1-echo2-mc", "root_sum_of_squares"}))
        .field("aggregate_cartilage", &O::aggregate_cartilage,
               "Merge the six tissues into patellar, femoral, tibial and meniscus (4 classes + background).")
        .field("normalize_data_method", &O::normalize_data_method,
               "zero_centered, zero_one, standard_score, or null "
               "(each channel on its own).",
               config::if_set(config::one_of(kNormalizeMethods)))
        .field("num_classes", &O::num_classes, "Classes of the model, background included.")
        .field("loss", &O::loss, "The model's loss, which decides the labels' layout (from the model section).",
               config::one_of({"bce", "multilabel_bce", "ssce", "ssce_dice"}))
        .hardware_only({"use_worker_cache", "duplicate_act_worker_data"}, "Cerebras cluster data staging")
        .ignored({"augment_data"}, "SkmDataProcessor never augments, as modelzoo's")
        .ignored({"mixed_precision", "use_bfloat16"}, "the model's precision keys decide it")
        .validate([](const O& o, const auto& fail) {
          if (o.image_shape.size() != 3) fail("image_shape", "required: [D, H, W]");
          const int64_t classes = o.aggregate_cartilage ? 5 : 7;
          if (o.num_classes != classes)
            fail("num_classes", "expected " + std::to_string(classes) + " (background and the " +
                                    (o.aggregate_cartilage ? "4 aggregated" : "6") + " tissues)");
        });
    return sc;
  }();
  return s;
}

SkmSource::SkmSource(const std::string& data_dir, const std::string& split, const SkmOptions& o)
    : data_dir_(data_dir), options_(o) {
  const std::string listing = data_dir + "/annotations/v1.0.0/" + split + ".json";
  std::ifstream in(listing);
  if (!in) throw std::runtime_error(listing + ": cannot open (SKM-TEA lists each split's files there)");
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const auto& image : j.at("images"))
      files_.push_back(data_dir + "/image_files/" + image.at("file_name").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(listing + ": expected {\"images\": [{\"file_name\": ...}, ...]} (" + e.what() + ")");
  }
  std::sort(files_.begin(), files_.end());
  if (files_.empty()) throw std::runtime_error(listing + ": lists no files");
}

Features SkmSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t>) const {
  std::vector<torch::Tensor> inputs, labels;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  for (int64_t id : ids) {
    const std::string& path = files_[id % num_samples()];
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) throw std::runtime_error(path + ": not a readable HDF5 file");
    torch::Tensor image, seg;
    try {
      const std::string& echo = options_.echo_type;
      auto volume = [&](const char* name) { return read_hdf5_floats(f, name, path + ", " + name); };
      if (echo == "echo1" || echo == "echo2") image = volume(echo.c_str()).unsqueeze(0);
      else if (echo == "echo1-echo2-mc") image = torch::stack({volume("echo1"), volume("echo2")});
      else image = (volume("echo1").square() + volume("echo2").square()).sqrt().unsqueeze(0);
      seg = volume("seg");
    } catch (...) {
      H5Fclose(f);
      throw;
    }
    H5Fclose(f);
    image = image.permute({0, 3, 1, 2});  // (C, X, Y, Z) -> (C, Z, X, Y)
    const std::vector<int64_t>& shape = options_.image_shape;
    if (image.size(1) != shape[0] || image.size(2) != shape[1] || image.size(3) != shape[2])
      throw std::runtime_error(path + ": volume " + c10::str(image.sizes().slice(1)) +
                               " (Z, X, Y), expected image_shape " + c10::str(torch::IntArrayRef(shape)));
    if (seg.dim() != 4 || seg.size(3) != 6)
      throw std::runtime_error(path + ": seg " + c10::str(seg.sizes()) + ", expected (X, Y, Z, 6) one-hot tissues");
    for (int64_t c = 0; c < image.size(0); ++c)
      image[c] = normalize_image(image[c], options_.normalize_data_method.value_or(""));
    // One-hot tissues -> class ids, 0 where none; the first tissue wins, as argmax does.
    torch::Tensor tissues = seg > 0.5;
    if (options_.aggregate_cartilage)
      tissues = torch::stack({tissues.select(3, 0), tissues.select(3, 1), tissues.select(3, 2) | tissues.select(3, 3),
                              tissues.select(3, 4) | tissues.select(3, 5)},
                             3);
    torch::Tensor classes = torch::zeros(tissues.sizes().slice(0, 3), torch::kByte);
    for (int64_t c = tissues.size(3) - 1; c >= 0; --c) classes.masked_fill_(tissues.select(3, c), uint8_t(c + 1));
    classes = classes.permute({2, 0, 1}).unsqueeze(0);  // (1, Z, X, Y)
    if (classes.sizes().slice(1) != image.sizes().slice(1))
      throw std::runtime_error(path + ": seg's volume differs from the image's");
    inputs.push_back(image.contiguous());
    labels.push_back(segmentation_labels(classes, options_.loss, options_.num_classes));
  }
  return {{"input", torch::stack(inputs)}, {"labels", torch::stack(labels)}};
}

namespace {

std::unique_ptr<DataLoader> open_skm(const SkmOptions& given, const config::Origin& at) {
  return open_map_style(given, at, "SKM-TEA's annotations/ and image_files/", [&](const std::string& dir, bool eval) {
    return std::make_shared<SkmSource>(dir, eval ? "val" : "train", given);
  });
}

}  // namespace

DataProcessor skm_processor() {
  return make_data_processor<SkmOptions>("SkmDataProcessor", "SKM-TEA knee MRI volumes (3D), for UNet.",
                                         {"input", "labels"}, open_skm);
}

}  // namespace zoo::data
