// Implementation of data/processors/severstal.h.
#include "data/processors/severstal.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/csv_table.h"
#include "data/image.h"

namespace zoo::data {

const config::Schema<SeverstalOptions>& SeverstalOptions::schema() {
  using O = SeverstalOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (SeverstalBinaryClassDataProcessor)",
                         "Severstal steel-defect images and masks (train.csv + train_images/) for UNet.");
    add_unet_input_fields(sc)
        .field("train_test_split", &O::train_test_split, "Share of the class's rows that train; the rest evaluate.",
               config::in_range(0.0, 1.0, false))
        .field("class_id", &O::class_id, "The defect class (1-4) whose rows are the samples.")
        .validate([](const O& o, const auto& fail) {
          if (o.train_test_split <= 0) fail("train_test_split", "required: the share of rows that train, in (0, 1]");
          if (o.class_id < 1 || o.class_id > 4) fail("class_id", "required: a defect class 1-4");
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

SeverstalSource::SeverstalSource(const std::string& data_dir, const SeverstalOptions& o, bool training)
    : data_dir_(data_dir), options_(o), augment_(o.augment_data) {
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
  const torch::Tensor image = read_jpeg(data_dir_ + "/train_images/" + row.image_id, options_.image_shape[2]);
  return unet_sample(image, mask, options_, id, resize_nearest);  // masks resized as torchvision resizes tensors
}

Features SeverstalSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t>) const {
  std::vector<std::pair<torch::Tensor, torch::Tensor>> samples;
  for (int64_t id : ids) samples.push_back(read_sample(id));
  return stack_samples(samples);
}

namespace {

std::unique_ptr<DataLoader> open_severstal(const SeverstalOptions& given, const config::Origin& at) {
  return open_map_style(given, at, "train.csv and train_images/", [&](const std::string& dir, bool eval) {
    return std::make_shared<SeverstalSource>(dir, given, !eval);
  });
}

}  // namespace

DataProcessor severstal_processor() {
  return make_data_processor<SeverstalOptions>("SeverstalBinaryClassDataProcessor",
                                               "Severstal steel-defect JPEGs and run-length masks, for UNet.",
                                               {"input", "labels"}, open_severstal);
}

}  // namespace zoo::data
