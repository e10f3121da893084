// Implementation of data/processors/imagenet.h.
#include "data/processors/imagenet.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <stdexcept>

#include "data/image.h"
#include "data/splitmix.h"

namespace zoo::data {

namespace fs = std::filesystem;

const config::Schema<ImageNetOptions>& ImageNetOptions::schema() {
  using O = ImageNetOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (ImageNet1KProcessor)",
                         "ImageNet JPEGs in data_dir/<split>/<class>/, with torchvision-style transforms.");
    add_loader_fields(sc)
        .field("split", &O::split, "train or val: the subdirectory of data_dir.", config::one_of({"train", "val"}))
        .field("transforms", &O::transforms, "The transforms each image passes through, in order.")
        .field("image_size", &O::image_size, "[H, W] of noaugment's resize.")
        .field("noaugment", &O::noaugment, "Only resize to image_size and to_tensor, whatever `transforms` says.")
        .field("num_classes", &O::num_classes, "Accepted (deprecated in modelzoo); the class folders decide.")
        .field("mixup_alpha", &O::mixup_alpha,
               "Accepted: modelzoo builds mixup but never applies it (docs/modelzoo.md); zoo neither.")
        .field("cutmix_alpha", &O::cutmix_alpha, "Accepted, as mixup_alpha.")
        .field("sampler", &O::sampler, "random (repeated-aug is not in zoo).", config::one_of({"random"}))
        .field("ra_sampler_num_repeat", &O::ra_sampler_num_repeat, "repeated-aug's repeats (unused with random).")
        .hardware_only({"use_worker_cache"}, "Cerebras cluster data staging")
        .ignored({"patch_size", "image_channels", "max_sequence_length"},
                 "the model's keys decide them; modelzoo 2.3 repeated them in the input section")
        .ignored({"use_fake_data"}, "deprecated in modelzoo")
        .validate([](const O& o, const auto& fail) {
          if (o.image_size.size() != 2 || o.image_size[0] <= 0 || o.image_size[1] <= 0)
            fail("image_size", "expected [H, W]");
          if (!o.noaugment && o.transforms.empty())
            fail("transforms", "required: the list of transforms (or noaugment: true)");
        });
    return sc;
  }();
  return s;
}

ClassFolders read_class_folders(const std::string& dir, const std::function<bool(const std::string& path)>& keep) {
  ClassFolders out;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory()) out.classes.push_back(entry.path().filename().string());
  std::sort(out.classes.begin(), out.classes.end());
  for (size_t c = 0; c < out.classes.size(); ++c) {
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(fs::path(dir) / out.classes[c]))
      if (entry.is_regular_file() && keep(entry.path().string())) files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    for (auto& f : files) out.files.emplace_back(std::move(f), static_cast<int64_t>(c));
  }
  return out;
}

ImageFolderSource::ImageFolderSource(const std::string& dir, TransformPipeline transforms, int64_t seed)
    : dir_(dir), transforms_(std::move(transforms)), seed_(seed) {
  ClassFolders found = read_class_folders(dir, [](const std::string& path) {
    std::string ext = fs::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    return ext == ".jpeg" || ext == ".jpg" || ext == ".png";
  });
  classes_ = std::move(found.classes);
  files_ = std::move(found.files);
  if (files_.empty())
    throw std::runtime_error(dir +
                             ": no images (expected <class>/*.JPEG or *.png subdirectories, as torchvision's "
                             "ImageFolder reads them)");
}

Features ImageFolderSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t>) const {
  std::vector<torch::Tensor> images;
  torch::Tensor labels = torch::empty({int64_t(ids.size())}, torch::kLong);
  for (size_t b = 0; b < ids.size(); ++b) {
    const auto& [path, cls] = files_[ids[b] % num_samples()];
    // Drawn from the seed, the epoch and the sample: the same on a resumed run.
    const uint64_t seed = SplitMix64::mix(uint64_t(seed_)) ^ uint64_t(ids[b]);
    images.push_back(transforms_.apply(read_image(path, 3), seed));
    labels[b] = cls;
  }
  for (const auto& image : images)
    if (image.sizes() != images.front().sizes())
      throw std::runtime_error(dir_ + ": the transforms give images of different sizes (" +
                               c10::str(images.front().sizes()) + " and " + c10::str(image.sizes()) +
                               "); end them with a fixed-size resize or crop");
  return {{"input", torch::stack(images)}, {"labels", labels}};
}

namespace {

std::unique_ptr<DataLoader> open_imagenet(const ImageNetOptions& given, const config::Origin& at) {
  if (given.data_dir.items.size() != 1) at.fail("data_dir", "required: the one directory holding the splits");
  const std::string root = require_directory(given.data_dir.items.front(), at);
  const std::string dir = root + "/" + given.split;
  if (!fs::is_directory(dir))
    at.fail("split", "no directory '" + given.split + "' in " + root + " (expected " + root + "/" + given.split +
                         "/<class>/*.JPEG)");
  std::vector<TransformSpec> specs = given.transforms;
  if (given.noaugment) {
    TransformSpec resize, to_tensor;
    resize.name = "resize";
    resize.size = config::NumberList{{double(given.image_size[0]), double(given.image_size[1])}};
    to_tensor.name = "to_tensor";
    specs = {resize, to_tensor};
  }
  std::shared_ptr<ImageFolderSource> source;
  try {
    source = std::make_shared<ImageFolderSource>(dir, TransformPipeline(specs), given.shuffle_seed);
  } catch (const std::exception& e) {
    at.fail("data_dir", e.what());
  }
  if (given.num_classes && *given.num_classes != int64_t(source->classes().size()))
    at.fail("num_classes", std::to_string(*given.num_classes) + " classes, but " + dir + " holds " +
                               std::to_string(source->classes().size()) + " class folders");
  return std::make_unique<MapStyleLoader>(source, given);
}

}  // namespace

DataProcessor imagenet_processor() {
  return make_data_processor<ImageNetOptions>("ImageNet1KProcessor",
                                              "ImageNet JPEG folders with torchvision-style transforms.",
                                              {"input", "labels"}, open_imagenet);
}

}  // namespace zoo::data
