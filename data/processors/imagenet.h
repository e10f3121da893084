// ImageNet1KProcessor: ImageNet laid out as torchvision's ImageNet dataset
// reads it (data_dir/<split>/<class>/*.JPEG or *.png, classes numbered in
// sorted order, as ImageFolder numbers them), each image decoded to RGB and passed
// through the section's `transforms`. Defines: ImageNetOptions,
// ClassFolders, read_class_folders, ImageFolderSource, imagenet_processor.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/image_transforms.h"
#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

struct ImageNetOptions : LoaderOptions {
  std::string split = "train";
  std::vector<TransformSpec> transforms;
  std::vector<int64_t> image_size = {224, 224};
  bool noaugment = false;  // resize to image_size and to_tensor only
  std::optional<int64_t> num_classes;
  double mixup_alpha = 0.1, cutmix_alpha = 0.1;  // accepted; modelzoo never applies them (see the README)
  std::string sampler = "random";
  int64_t ra_sampler_num_repeat = 3;
  static const config::Schema<ImageNetOptions>& schema();
};

// A directory of class folders as torchvision's ImageFolder reads it: the
// classes are its subdirectories in sorted order, numbered from 0, and the
// samples each class folder's regular files that `keep` (given the path)
// accepts, sorted, class after class.
struct ClassFolders {
  std::vector<std::string> classes;
  std::vector<std::pair<std::string, int64_t>> files;  // (path, class)
};
ClassFolders read_class_folders(const std::string& dir, const std::function<bool(const std::string& path)>& keep);

class ImageFolderSource : public SampleSource {
 public:
  // Lists `dir`'s class subdirectories and their JPEG files; throws
  // std::runtime_error naming `dir` when it holds none.
  ImageFolderSource(const std::string& dir, TransformPipeline transforms, int64_t seed);
  int64_t num_samples() const override { return static_cast<int64_t>(files_.size()); }
  std::string describe() const override { return dir_; }
  // input (B, 3, H, W) (float after to_tensor), labels int64 (B).
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  bool reads_epoch() const override { return true; }  // random transforms are drawn anew each epoch
  const std::vector<std::string>& classes() const { return classes_; }

 private:
  std::string dir_;
  TransformPipeline transforms_;
  int64_t seed_;
  std::vector<std::string> classes_;
  std::vector<std::pair<std::string, int64_t>> files_;  // (path, class)
};

DataProcessor imagenet_processor();

}  // namespace zoo::data
