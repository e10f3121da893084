// Implementation of data/severstal.h.
#include "data/severstal.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/csv_table.h"
#include "data/image.h"
#include "data/splitmix.h"

namespace zoo::data {

const config::Schema<SeverstalOptions>& SeverstalOptions::schema() {
  using O = SeverstalOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (SeverstalBinaryClassDataProcessor)",
                         "Severstal steel-defect images and masks (train.csv + train_images/) for UNet.");
    add_loader_fields(sc)
        .field("image_shape", &O::image_shape, "(H, W, C) of the model's input; C is 1 (gray) or 3 (RGB).")
        .field("max_image_shape", &O::max_image_shape,
               "(H, W) the images are resized to at most; a larger image_shape tiles them.")
        .field("normalize_data_method", &O::normalize_data_method, "zero_centered, zero_one, standard_score, or null.",
               config::if_set(config::one_of(kNormalizeMethods)))
        .field("augment_data", &O::augment_data, "Random flips, quarter turns and brightness, drawn anew each epoch.")
        .field("train_test_split", &O::train_test_split, "Share of the class's rows that train; the rest evaluate.",
               config::in_range(0.0, 1.0, false))
        .field("class_id", &O::class_id, "The defect class (1-4) whose rows are the samples.")
        .field("num_classes", &O::num_classes, "Classes of the model (2: defect or not).")
        .field("loss", &O::loss, "The model's loss, which decides the labels' layout (from the model section).",
               config::one_of({"bce", "multilabel_bce", "ssce", "ssce_dice"}))
        .hardware_only({"use_worker_cache", "duplicate_act_worker_data"}, "Cerebras cluster data staging")
        .ignored({"use_fast_dataloader"}, "zoo always uses its own loader")
        .ignored({"mixed_precision", "use_bfloat16"}, "the model's precision keys decide it")
        .validate([](const O& o, const auto& fail) {
          if (o.image_shape.size() != 3 || o.image_shape[0] <= 0 || o.image_shape[1] <= 0 ||
              (o.image_shape[2] != 1 && o.image_shape[2] != 3))
            fail("image_shape", "required: [H, W, C] with C 1 or 3");
          if (o.max_image_shape.size() != 2 || o.max_image_shape[0] <= 0 || o.max_image_shape[1] <= 0)
            fail("max_image_shape", "expected [H, W]");
          if (o.train_test_split <= 0) fail("train_test_split", "required: the share of rows that train, in (0, 1]");
          if (o.class_id < 1 || o.class_id > 4) fail("class_id", "required: a defect class 1-4");
          if (o.num_classes < 2) fail("num_classes", "expected at least 2 classes");
        });
    return sc;
  }();
  return s;
}

torch::Tensor decode_rle_mask(const std::string& encoded, int64_t height, int64_t width) {
  torch::Tensor mask = torch::zeros({width * height}, torch::kByte);  // column-major
  std::istringstream in(encoded);
  std::vector<int64_t> numbers;
  std::string word;
  while (in >> word) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size()) throw std::invalid_argument("EncodedPixels: '" + word + "' is not a number");
    numbers.push_back(v);
  }
  if (numbers.empty() || (numbers.size() == 1 && numbers[0] == -1)) return mask.view({width, height}).t().contiguous();
  if (numbers.size() % 2 != 0) throw std::invalid_argument("EncodedPixels: expected pairs of start and length");
  uint8_t* m = mask.data_ptr<uint8_t>();
  for (size_t i = 0; i < numbers.size(); i += 2) {
    const int64_t start = numbers[i] - 1, length = numbers[i + 1];
    if (start < 0 || length < 0 || start + length > width * height)
      throw std::invalid_argument("EncodedPixels: run " + std::to_string(numbers[i]) + " " + std::to_string(length) +
                                  " leaves the " + std::to_string(width) + " x " + std::to_string(height) + " image");
    std::fill(m + start, m + start + length, uint8_t{1});
  }
  return mask.view({width, height}).t().contiguous();
}

torch::Tensor segmentation_labels(const torch::Tensor& mask, const std::string& loss, int64_t num_classes) {
  if (loss == "bce") return mask.to(torch::kFloat);
  const torch::Tensor ids = mask.squeeze(0).to(torch::kLong);
  if (loss == "multilabel_bce") return torch::one_hot(ids, num_classes).permute({2, 0, 1}).to(torch::kFloat);
  return ids;
}

SeverstalSource::SeverstalSource(const std::string& data_dir, const SeverstalOptions& o, bool training)
    : data_dir_(data_dir), options_(o), augment_(o.augment_data) {
  height_ = std::min(o.image_shape[0], o.max_image_shape[0]);
  width_ = std::min(o.image_shape[1], o.max_image_shape[1]);
  const std::string csv = data_dir + "/train.csv";
  std::ifstream in(csv);
  if (!in) throw std::runtime_error(csv + ": cannot open (a Severstal data_dir holds train.csv and train_images/)");
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::vector<std::string> header = split_csv_record(line);
  auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end())
      throw std::runtime_error(csv + ": no column " + name + " (expected the header ImageId,ClassId,EncodedPixels)");
    return static_cast<size_t>(it - header.begin());
  };
  const size_t image_col = column("ImageId"), class_col = column("ClassId"), pixels_col = column("EncodedPixels");
  std::vector<Row> rows;
  for (int64_t number = 2; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::vector<std::string> f = split_csv_record(line);
    if (f.size() != header.size())
      throw std::runtime_error(csv + ", line " + std::to_string(number) + ": " + std::to_string(f.size()) +
                               " fields, the header has " + std::to_string(header.size()));
    int64_t cls = 0;
    try {
      cls = std::stoll(f[class_col]);
    } catch (const std::exception&) {
      throw std::runtime_error(csv + ", line " + std::to_string(number) + ": ClassId '" + f[class_col] +
                               "' is not a number");
    }
    if (cls == o.class_id) rows.push_back({f[image_col], f[pixels_col], number});
  }
  const auto train_rows = static_cast<size_t>(std::floor(o.train_test_split * double(rows.size())));
  if (training) rows_.assign(rows.begin(), rows.begin() + train_rows);
  else rows_.assign(rows.begin() + train_rows, rows.end());
  if (rows_.empty())
    throw std::runtime_error(csv + ": no " + std::string(training ? "training" : "eval") + " rows of ClassId " +
                             std::to_string(o.class_id) + " (" + std::to_string(rows.size()) +
                             " rows of that class, train_test_split " + std::to_string(o.train_test_split) + ")");
}

std::pair<torch::Tensor, torch::Tensor> SeverstalSource::read_sample(int64_t id) const {
  const int64_t n = num_samples();
  const Row& row = rows_[id % n];
  const std::string csv_line = data_dir_ + "/train.csv, line " + std::to_string(row.line);
  torch::Tensor mask;
  try {
    mask = decode_rle_mask(row.encoded_pixels, 256, 1600).unsqueeze(0);  // Severstal's images are 1600 x 256
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(csv_line + ": " + e.what());
  }
  const std::vector<int64_t>& shape = options_.image_shape;
  torch::Tensor image = read_jpeg(data_dir_ + "/train_images/" + row.image_id, shape[2]);
  image = tile_image(resize_image(image, height_, width_, "bicubic"), shape[0], shape[1]);
  mask = tile_image(resize_nearest(mask, height_, width_), shape[0], shape[1]);
  image = normalize_image(image, options_.normalize_data_method.value_or(""));
  if (augment_) {
    // Drawn from the seed, the epoch and the sample: the same on a resumed run.
    const auto a = SegmentationAugment::draw(SplitMix64::mix(uint64_t(options_.shuffle_seed)) ^ uint64_t(id),
                                             shape[0] == shape[1]);
    image = a.image(image), mask = a.mask(mask);
  }
  return {image, segmentation_labels(mask, options_.loss, options_.num_classes)};
}

Features SeverstalSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t>) const {
  std::vector<torch::Tensor> images, labels;
  for (int64_t id : ids) {
    auto [image, label] = read_sample(id);
    images.push_back(image), labels.push_back(label);
  }
  return {{"input", torch::stack(images)}, {"labels", torch::stack(labels)}};
}

namespace {

std::unique_ptr<DataLoader> open_severstal(const SeverstalOptions& given, const config::Origin& at) {
  if (given.data_dir.items.size() != 1) at.fail("data_dir", "required: the one directory holding train.csv");
  const std::string dir = require_directory(given.data_dir.items.front(), at);
  const std::string& section = at.context().path;
  const bool training = !(section == "eval_input" || section.find("val_dataloader") != std::string::npos);
  std::shared_ptr<SeverstalSource> source;
  try {
    source = std::make_shared<SeverstalSource>(dir, given, training);
  } catch (const std::runtime_error& e) {
    at.fail("data_dir", e.what());
  }
  return std::make_unique<MapStyleLoader>(source, given);
}

}  // namespace

DataProcessor severstal_processor() {
  return make_data_processor<SeverstalOptions>("SeverstalBinaryClassDataProcessor",
                                               "Severstal steel-defect JPEGs and run-length masks, for UNet.",
                                               {"input", "labels"}, open_severstal);
}

}  // namespace zoo::data
