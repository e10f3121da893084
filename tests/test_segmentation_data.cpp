// UNet's data processors (data/severstal, data/cityscapes, data/inria,
// data/unet_hdf5) and the image files under them (data/image): JPEG, PNG and
// TIFF decoding, torchvision's resizes against torch's interpolate, the
// run-length masks and label tables, joint augmentation, exact resume, and
// UNets trained from each layout.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "convert_fixtures.h"
#include "data/image.h"
#include "data/processors/cityscapes.h"
#include "data/processors/inria.h"
#include "data/processors/severstal.h"
#include "data/processors/skm.h"
#include "data/processors/unet_hdf5.h"
#include "data_fixtures.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;
using zoo::testing::write_severstal;

// Severstal's EncodedPixels count 1-based down each column.
TEST(SeverstalData, RunLengthMasksCountDownColumns) {
  const torch::Tensor m = data::decode_rle_mask("1 3 10 2", 4, 3);  // 4 rows, 3 columns
  const torch::Tensor expected = torch::tensor({1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0}, torch::kByte).view({4, 3});
  EXPECT_TRUE(torch::equal(m, expected)) << m;
  EXPECT_EQ(data::decode_rle_mask("-1", 4, 3).sum().item<int64_t>(), 0);
  EXPECT_THROW(data::decode_rle_mask("11 3", 4, 3), std::invalid_argument);  // leaves the image
  EXPECT_THROW(data::decode_rle_mask("1 x", 4, 3), std::invalid_argument);
  EXPECT_THROW(data::decode_rle_mask("1", 4, 3), std::invalid_argument);
}

namespace {

data::SeverstalOptions severstal_options(const std::string& dir, std::vector<int64_t> shape, bool augment) {
  YAML::Node n = YAML::Load(
      "{data_processor: SeverstalBinaryClassDataProcessor, batch_size: 2, train_test_split: 0.75, "
      "class_id: 3, normalize_data_method: zero_centered}");
  n["data_dir"] = dir;
  n["augment_data"] = augment;
  n["image_shape"] = shape;
  return data::SeverstalOptions::schema().parse(n, config::Context{"p.yaml", "train_input"});
}

}  // namespace

// JPEGs decode to what was written (within JPEG's loss); color becomes luma as PIL's convert("L").
TEST(SeverstalData, JpegsDecodeAsWritten) {
  TempDir dir;
  const torch::Tensor ramp =
      torch::arange(0, 256, torch::kFloat).view({1, 1, 256}).expand({1, 16, 256}).to(torch::kByte);
  data::write_jpeg(dir / "gray.jpg", ramp, 100);
  const torch::Tensor gray = data::read_jpeg(dir / "gray.jpg", 1);
  ASSERT_EQ(gray.sizes(), ramp.sizes());
  EXPECT_LE((gray.to(torch::kInt) - ramp.to(torch::kInt)).abs().max().item<int>(), 2);
  const torch::Tensor color =
      torch::tensor({200, 100, 50}, torch::kByte).view({3, 1, 1}).expand({3, 16, 16}).contiguous();
  data::write_jpeg(dir / "color.jpg", color, 100);
  const torch::Tensor luma = data::read_jpeg(dir / "color.jpg", 1);
  EXPECT_NEAR(luma.to(torch::kFloat).mean().item<double>(), 0.299 * 200 + 0.587 * 100 + 0.114 * 50, 2.0);
  EXPECT_EQ(data::read_jpeg(dir / "gray.jpg", 3).size(0), 3);
  // CMYK (Adobe's inverted storage, as libjpeg writes it): RGB = stored C x stored K / 255, as PIL converts.
  const torch::Tensor cmyk =
      torch::tensor({200, 100, 50, 250}, torch::kByte).view({4, 1, 1}).expand({4, 16, 16}).contiguous();
  data::write_jpeg(dir / "cmyk.jpg", cmyk, 100);
  const torch::Tensor rgb = data::read_jpeg(dir / "cmyk.jpg", 3).to(torch::kFloat).mean({1, 2});
  EXPECT_NEAR(rgb[0].item<double>(), 200.0 * 250 / 255, 3.0) << rgb;
  EXPECT_NEAR(rgb[1].item<double>(), 100.0 * 250 / 255, 3.0) << rgb;
  EXPECT_NEAR(rgb[2].item<double>(), 50.0 * 250 / 255, 3.0) << rgb;
  zoo::testing::write_file(dir / "bad.jpg", "not a jpeg");
  try {
    data::read_jpeg(dir / "bad.jpg", 1);
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jpg: not a readable JPEG"), std::string::npos) << e.what();
  }
}

// A sample is torchvision's pipeline: bicubic antialiased resize of the
// decoded image, nearest resize of the mask, zero_centered; checked against
// torch's own interpolate in Python. Wider than max_image_shape tiles.
TEST(SeverstalData, SamplesAreTorchvisionsResizes) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  TempDir dir;
  write_severstal(dir / "d", 4, 7);
  data::SeverstalSource source(dir / "d", severstal_options(dir / "d", {32, 64, 1}, false), true);
  ASSERT_EQ(source.num_samples(), 3);  // 3 of the 4 class-3 rows train
  const auto batch = source.read_batch({0, 2}, std::nullopt);
  ASSERT_EQ(batch.at("input").sizes(), (std::vector<int64_t>{2, 1, 32, 64}));
  ASSERT_EQ(batch.at("labels").sizes(), (std::vector<int64_t>{2, 1, 32, 64}));
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("decoded", data::read_jpeg(dir / "d/train_images/img2.jpg", 1));
  d.insert("mask", data::decode_rle_mask(
                       [&] {
                         std::ifstream in(dir / "d/train.csv");
                         std::string line;
                         while (std::getline(in, line))
                           if (line.rfind("img2.jpg,3,", 0) == 0) return line.substr(11);
                         return std::string();
                       }(),
                       256, 1600));
  d.insert("input", batch.at("input")[1]);
  d.insert("labels", batch.at("labels")[1]);
  ckpt::save_checkpoint_file(dir / "s.pt", d);
  const std::string script =
      zoo::testing::write_file(dir / "ref.py", zoo::testing::oracle("segmentation_data_reference.py"));
  const auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "s.pt"));
  EXPECT_EQ(r.exit_code, 0) << r.output;

  data::SeverstalSource wide(dir / "d", severstal_options(dir / "d", {32, 2000, 1}, false), true);
  const torch::Tensor tiled = wide.read_batch({0}, std::nullopt).at("input")[0];
  ASSERT_EQ(tiled.size(2), 2000);
  EXPECT_TRUE(torch::equal(tiled.narrow(2, 1600, 400), tiled.narrow(2, 0, 400)));
}

// Augmentation flips and turns the image and its mask together, and draws
// anew each epoch; the eval split is the rows after train_test_split.
TEST(SeverstalData, AugmentationMovesImageAndMaskTogether) {
  TempDir dir;
  write_severstal(dir / "d", 8, 11);
  data::SeverstalSource plain(dir / "d", severstal_options(dir / "d", {32, 32, 1}, false), true);
  data::SeverstalSource augmented(dir / "d", severstal_options(dir / "d", {32, 32, 1}, true), true);
  ASSERT_EQ(augmented.num_samples(), 6);
  EXPECT_TRUE(augmented.reads_epoch());
  int changed = 0;
  for (int64_t epoch = 0; epoch < 3; ++epoch)
    for (int64_t i = 0; i < 6; ++i) {
      const auto a = augmented.read_batch({epoch * 6 + i}, std::nullopt), p = plain.read_batch({i}, std::nullopt);
      const torch::Tensor bright = a.at("input")[0] > 0, mask = a.at("labels")[0] > 0.5;
      // Bicubic edges and nearest masks may disagree by a pixel along the border.
      EXPECT_GT((bright == mask).to(torch::kFloat).mean().item<double>(), 0.95) << "epoch " << epoch << " sample " << i;
      changed += !torch::equal(a.at("labels"), p.at("labels"));
    }
  EXPECT_GT(changed, 4);  // flips and turns happen
  data::SeverstalSource eval(dir / "d", severstal_options(dir / "d", {32, 32, 1}, false), false);
  EXPECT_EQ(eval.num_samples(), 2);
}

// modelzoo's Severstal layout trains: a UNet learns the bright defects
// (eval mean IoU well above an all-background guess) from a legacy-format
// params file that names no model, as modelzoo's unet/run.py starts it.
TEST(SeverstalData, UNetTrainsOnSeverstalData) {
  TempDir dir;
  write_severstal(dir / "d", 16, 5);
  const std::string params = zoo::testing::write_file(dir / "p.yaml", R"(
train_input: &train_input
  data_processor: SeverstalBinaryClassDataProcessor
  data_dir: )" + (dir / "d") + R"(
  image_shape: [32, 32, 1]
  normalize_data_method: zero_centered
  augment_data: true
  shuffle: true
  shuffle_seed: 2
  train_test_split: 0.75
  batch_size: 4
  num_classes: 2
  num_workers: 2
  class_id: 3
  use_worker_cache: false
eval_input:
  <<: *train_input
  augment_data: false
  shuffle: false
  batch_size: 4
model:
  nonlinearity: ReLU
  skip_connect: true
  enable_bias: false
  downscale_method: max_pool
  convs_per_block: [3x3_conv, 3x3_conv]
  encoder_filters: [8, 16, 32]
  decoder_filters: [16, 8]
  residual_blocks: false
  initializer: {name: glorot_uniform, gain: 1.0}
  bias_initializer: zeros
  loss: bce
  norm_layer: batchnorm2d
optimizer:
  optimizer_type: Adam
  learning_rate: 0.01
runconfig:
  max_steps: 60
  eval_frequency: 60
  log_steps: 10
  checkpoint_steps: 60
  eval_steps: 1
  seed: 1
)");
  const auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                           " --mode train_and_eval --model_dir " + (dir / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("zoo builds unet"), std::string::npos) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("Metric: eval/mean_iou = ([0-9.e+-]+)"))) << r.output;
  EXPECT_GT(std::stod(m[1]), 0.8) << r.output;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("Metric: eval/accuracy = ([0-9.e+-]+)"))) << r.output;
  EXPECT_GT(std::stod(m[1]), 0.95) << r.output;
  EXPECT_NE(r.output.find("Metric: eval/dice_coefficient"), std::string::npos) << r.output;

  // Stopped at step 30 and resumed, the run continues exactly: the same
  // augmentations, the same batch-norm statistics, the same losses.
  const std::vector<double> whole = zoo::testing::train_losses(r.output);
  ASSERT_EQ(whole.size(), 6u) << r.output;
  const std::string train =
      zoo::testing::zoo_binary() + " CPU --params " + params + " --mode train --model_dir " + (dir / "resumed");
  auto first = zoo::testing::run_command(train + " --max_steps 30");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto rest = zoo::testing::run_command(train + " --max_steps 60");
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  std::vector<double> resumed = zoo::testing::train_losses(first.output);
  for (double l : zoo::testing::train_losses(rest.output)) resumed.push_back(l);
  EXPECT_EQ(resumed, whole) << first.output << rest.output;

  // Errors name the file and the key.
  const std::string missing = zoo::testing::open_error(
      "{data_processor: SeverstalBinaryClassDataProcessor, batch_size: 2, image_shape: [32, 32, 1], "
      "train_test_split: 0.5, class_id: 3, data_dir: " +
      (dir / "run") + "}");
  EXPECT_NE(missing.find("data_dir: " + (dir / "run") + "/train.csv: cannot open"), std::string::npos) << missing;
  const std::string no_rows = zoo::testing::open_error(
      "{data_processor: SeverstalBinaryClassDataProcessor, batch_size: 2, image_shape: [32, 32, 1], "
      "train_test_split: 0.5, class_id: 4, data_dir: " +
      (dir / "d") + "}");
  EXPECT_NE(no_rows.find("no training rows of ClassId 4"), std::string::npos) << no_rows;
}

// PNGs read back exactly (gray label maps keep their values), and
// read_image tells JPEG from PNG by content, not by name.
TEST(CityscapesData, PngsReadBackExactly) {
  TempDir dir;
  torch::manual_seed(6);
  const torch::Tensor rgb = torch::randint(0, 256, {3, 7, 9}, torch::kLong).to(torch::kByte);
  const torch::Tensor gray = torch::randint(0, 34, {1, 7, 9}, torch::kLong).to(torch::kByte);
  data::write_png(dir / "rgb.png", rgb);
  data::write_png(dir / "gray.JPEG", gray);  // a PNG under a JPEG name, as one of ImageNet's files
  EXPECT_TRUE(torch::equal(data::read_png(dir / "rgb.png", 3), rgb));
  EXPECT_TRUE(torch::equal(data::read_image(dir / "gray.JPEG", 1), gray));
  EXPECT_EQ(data::read_image(dir / "rgb.png", 1).size(0), 1);
  zoo::testing::write_file(dir / "bad.png", "GIF89a....");
  try {
    data::read_image(dir / "bad.png", 3);
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.png: not a JPEG, PNG or TIFF"), std::string::npos) << e.what();
  }
}

namespace {

// Cityscapes' layout with 32 x 64 street scenes: sky (label id 23) above a
// road (7) with a car (26) at a random place; a few pixels of an id
// Cityscapes leaves out of evaluation (4). Images colour each region.
void write_cityscapes(const std::string& root, const std::string& split, const std::vector<std::string>& cities,
                      int per_city, uint64_t seed) {
  torch::manual_seed(static_cast<int64_t>(seed));
  for (const auto& city : cities) {
    std::filesystem::create_directories(root + "/leftImg8bit/" + split + "/" + city);
    std::filesystem::create_directories(root + "/gtFine/" + split + "/" + city);
    for (int i = 0; i < per_city; ++i) {
      torch::Tensor ids = torch::full({1, 32, 64}, 23, torch::kLong);
      const int64_t horizon = 12 + torch::randint(0, 8, {1}).item<int64_t>();
      ids.narrow(1, horizon, 32 - horizon).fill_(7);
      const int64_t x = torch::randint(0, 48, {1}).item<int64_t>();
      ids.narrow(1, horizon, 6).narrow(2, x, 14).fill_(26);
      ids.narrow(1, 0, 2).narrow(2, 0, 2).fill_(4);
      torch::Tensor image = torch::zeros({3, 32, 64});
      const std::vector<std::pair<int64_t, std::vector<float>>> colours = {
          {23, {90, 140, 230}}, {7, {120, 120, 120}}, {26, {220, 30, 30}}, {4, {10, 10, 10}}};
      for (const auto& [id, c] : colours)
        for (int ch = 0; ch < 3; ++ch) image[ch].masked_fill_(ids[0] == id, c[ch]);
      image = (image + torch::randn({3, 32, 64}) * 8).clamp(0, 255);
      const std::string name = city + "_" + std::to_string(i) + "_000019";
      data::write_png(root + "/leftImg8bit/" + split + "/" + city + "/" + name + "_leftImg8bit.png",
                      image.to(torch::kByte));
      data::write_png(root + "/gtFine/" + split + "/" + city + "/" + name + "_gtFine_labelIds.png",
                      ids.to(torch::kByte));
    }
  }
}

}  // namespace

// Label ids become modelzoo's 20 classes, masks shrink as PIL's nearest
// (pixel centres), and a UNet laid out as modelzoo's Cityscapes file learns
// the scene classes from a legacy params file.
TEST(CityscapesData, LabelsMapToTwentyClassesAndAUNetLearnsThem) {
  TempDir dir;
  write_cityscapes(dir / "cs", "train", {"aachen", "bochum"}, 6, 1);
  write_cityscapes(dir / "cs", "val", {"frankfurt"}, 4, 2);
  EXPECT_EQ(data::cityscapes_train_id(7), 1);
  EXPECT_EQ(data::cityscapes_train_id(23), 11);
  EXPECT_EQ(data::cityscapes_train_id(26), 14);
  EXPECT_EQ(data::cityscapes_train_id(4), 0);
  YAML::Node n = YAML::Load(
      "{data_processor: CityscapesDataProcessor, batch_size: 2, image_shape: [16, 32, 3], "
      "augment_data: false, normalize_data_method: zero_centered}");
  n["data_dir"] = dir / "cs";
  const auto options = data::CityscapesOptions::schema().parse(n, config::Context{"p.yaml", "train_input"});
  data::CityscapesSource source(dir / "cs", "train", options);
  ASSERT_EQ(source.num_samples(), 12);
  const auto batch = source.read_batch({0}, std::nullopt);
  const torch::Tensor labels = batch.at("labels")[0];  // ssce: (H, W) class ids
  const torch::Tensor full = data::read_image(dir / "cs/gtFine/train/aachen/aachen_0_000019_gtFine_labelIds.png", 1)[0];
  for (int64_t i = 0; i < 16; ++i)
    for (int64_t j = 0; j < 32; ++j)
      ASSERT_EQ(labels[i][j].item<int64_t>(), data::cityscapes_train_id(full[2 * i + 1][2 * j + 1].item<int64_t>()))
          << i << ", " << j;

  const std::string params = zoo::testing::write_file(dir / "p.yaml", R"(
train_input: &train_input
  data_processor: CityscapesDataProcessor
  data_dir: )" + (dir / "cs") + R"(
  image_shape: [16, 32, 3]
  normalize_data_method: zero_centered
  augment_data: true
  shuffle: true
  batch_size: 4
  num_classes: 20
  num_workers: 2
  use_worker_cache: true
eval_input:
  <<: *train_input
  augment_data: false
  shuffle: false
model:
  nonlinearity: ReLU
  skip_connect: true
  enable_bias: true
  downscale_method: max_pool
  convs_per_block: [3x3_conv, 3x3_conv]
  encoder_filters: [16, 32, 64]
  decoder_filters: [32, 16]
  norm_layer: group
  norm_kwargs: {num_groups: 4}
  initializer: {name: glorot_uniform, gain: 1.0}
  bias_initializer: zeros
  loss: ssce
  eval_ignore_classes: [0]
optimizer:
  optimizer_type: Adam
  learning_rate: 0.01
runconfig:
  max_steps: 80
  eval_frequency: 80
  eval_steps: 1
  log_steps: 10
  seed: 1
)");
  const auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                           " --mode train_and_eval --model_dir " + (dir / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("Metric: eval/accuracy = ([0-9.e+-]+)"))) << r.output;
  EXPECT_GT(std::stod(m[1]), 0.9) << r.output;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("Metric: eval/mean_iou = ([0-9.e+-]+)"))) << r.output;
  EXPECT_GT(std::stod(m[1]), 0.6) << r.output;  // sky, road and car, class 0 left out
}

namespace {

// TIFF files written from the TIFF 6.0 layout in Python (PIL is not
// installed here): baseline, uncompressed, 8-bit strips, either byte order.
const std::string kPyTiff = zoo::testing::oracle("tiff_prelude.py");

}  // namespace

// Uncompressed TIFFs (as PIL saves them) read back exactly in either byte
// order, in several strips; what zoo does not read is named.
TEST(InriaData, UncompressedTiffsReadBackExactly) {
  ZOO_SKIP_WITHOUT_NUMPY();
  TempDir dir;
  const std::string script =
      zoo::testing::write_file(dir / "t.py", kPyTiff + zoo::testing::oracle("segmentation_data_write_tiffs.py"));
  const auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const torch::Tensor rgb = zoo::testing::read_raw(dir / "rgb.bin", torch::kByte, {3, 7, 9});
  const torch::Tensor gray = zoo::testing::read_raw(dir / "gray.bin", torch::kByte, {1, 5, 6});
  EXPECT_TRUE(torch::equal(data::read_image(dir / "rgb.tif", 3), rgb));
  EXPECT_TRUE(torch::equal(data::read_tiff(dir / "gray_be.tif", 1), gray));
  EXPECT_TRUE(torch::equal(data::read_tiff(dir / "white.tif", 1), 255 - gray));
  EXPECT_TRUE(torch::equal(data::read_tiff(dir / "rgba.tif", 3), rgb));
  try {
    data::read_tiff(dir / "lzw.tif", 1);
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lzw.tif: a compressed TIFF (compression 5"), std::string::npos) << e.what();
  }
}

// modelzoo's Inria layout: <split>/images/*.tif and <split>/gt/*.tif with
// buildings at 255; a UNet learns the bright roofs.
TEST(InriaData, UNetTrainsOnInriaLayoutTiffs) {
  ZOO_SKIP_WITHOUT_NUMPY();
  TempDir dir;
  const std::string script =
      zoo::testing::write_file(dir / "t.py", kPyTiff + zoo::testing::oracle("segmentation_data_write_inria.py"));
  auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "d"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string params = zoo::testing::write_file(dir / "p.yaml", R"(
train_input: &train_input
  data_processor: InriaAerialDataProcessor
  data_dir: )" + (dir / "d") + R"(
  image_shape: [32, 32, 3]
  normalize_data_method: zero_centered
  augment_data: true
  shuffle: true
  train_test_split: 0.85
  batch_size: 4
  num_classes: 2
  use_fast_dataloader: true
eval_input:
  <<: *train_input
  augment_data: false
  shuffle: false
model:
  nonlinearity: ReLU
  enable_bias: false
  encoder_filters: [8, 16, 32]
  decoder_filters: [16, 8]
  norm_layer: batchnorm2d
  initializer: {name: glorot_uniform, gain: 1.0}
  bias_initializer: zeros
  loss: bce
optimizer:
  optimizer_type: Adam
  learning_rate: 0.01
runconfig:
  max_steps: 60
  eval_frequency: 60
  eval_steps: 1
  log_steps: 10
  seed: 1
)");
  r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                " --mode train_and_eval --model_dir " + (dir / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("Metric: eval/accuracy = ([0-9.e+-]+)"))) << r.output;
  EXPECT_GT(std::stod(m[1]), 0.9) << r.output;
  // A file at another size than image_shape is named.
  const std::string wrong = zoo::testing::open_error(
      "{data_processor: InriaAerialDataProcessor, batch_size: 2, image_shape: [16, 16, 3], data_dir: " + (dir / "d") +
      "}");
  EXPECT_EQ(wrong, "no error");  // opening lists the files; reading a batch finds the size
  YAML::Node n = YAML::Load("{data_processor: InriaAerialDataProcessor, batch_size: 2, image_shape: [16, 16, 3]}");
  n["data_dir"] = dir / "d";
  const auto options = data::InriaOptions::schema().parse(n, config::Context{"p.yaml", "train_input"});
  data::InriaSource source(dir / "d", "train", options);
  try {
    source.read_batch({0}, std::nullopt);
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("tile0.tif: 32 x 32 pixels, but image_shape is 16 x 16"), std::string::npos)
        << e.what();
  }
}

// R1.x's UNet HDF5 files as create_hdf5_files.py writes them (n_examples,
// example_<k>/image and /label, written round-robin over the files): the
// samples come back normalized, and a UNet trains on them.
TEST(UNetHdf5Data, ReadsCreateHdf5FilesLayoutAndTrains) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  const auto r = zoo::testing::run_command(
      "/usr/bin/python3 -c \"\nimport h5py, numpy as np, os, sys\n"
      "rng = np.random.default_rng(5)\n"
      "for split, n in [('train', 12), ('eval', 4)]:\n"
      "    d = '" +
      (dir / "h5") +
      "/' + split\n"
      "    os.makedirs(d)\n"
      "    files = [h5py.File(f'{d}/part{i}.h5', 'w') for i in range(2)]\n"
      "    counts = [0, 0]\n"
      "    for j in range(n):\n"
      "        gt = np.zeros((1, 32, 32), np.float32)\n"
      "        y, x = rng.integers(0, 20, 2)\n"
      "        gt[0, y:y + 10, x:x + 10] = 1\n"
      "        img = np.clip(rng.normal(60, 8, (1, 32, 32)), 0, 255).round().astype(np.float32)\n"
      "        img[gt == 1] = 210\n"
      "        w = files[j % 2]\n"
      "        w.create_dataset(f'example_{counts[j % 2]}/image', data=img)\n"
      "        w.create_dataset(f'example_{counts[j % 2]}/label', data=gt)\n"
      "        counts[j % 2] += 1\n"
      "    for w, c in zip(files, counts):\n"
      "        w.attrs['n_examples'] = c\n"
      "        w.close()\n\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  YAML::Node n = YAML::Load(
      "{data_processor: Hdf5DataProcessor, batch_size: 2, image_shape: [32, 32, 1], "
      "augment_data: false, normalize_data_method: zero_centered}");
  n["data_dir"] = dir / "h5/train";
  const auto options = data::UNetHdf5Options::schema().parse(n, config::Context{"p.yaml", "train_input"});
  data::UNetHdf5Source source({dir / "h5/train/part0.h5", dir / "h5/train/part1.h5"}, options);
  ASSERT_EQ(source.num_samples(), 12);
  const auto batch = source.read_batch({0, 6}, std::nullopt);  // part0's example_0 and part1's example_0
  const torch::Tensor input = batch.at("input"), labels = batch.at("labels");
  ASSERT_EQ(input.sizes(), (std::vector<int64_t>{2, 1, 32, 32}));
  // zero_centered: the 210 squares at 210 / 127.5 - 1, exactly where the labels are 1.
  EXPECT_TRUE(torch::equal(input.isclose(torch::full({}, 210 / 127.5 - 1)), labels > 0.5));
  EXPECT_EQ(labels.sum().item<double>(), 200.0);

  const std::string params = zoo::testing::write_file(dir / "p.yaml", R"(
train_input:
  data_processor: Hdf5DataProcessor
  data_dir: )" + (dir / "h5/train") + R"(
  image_shape: [32, 32, 1]
  normalize_data_method: zero_centered
  augment_data: true
  shuffle: true
  batch_size: 4
  num_classes: 2
eval_input:
  data_processor: Hdf5DataProcessor
  data_dir: )" + (dir / "h5/eval") + R"(
  image_shape: [32, 32, 1]
  normalize_data_method: zero_centered
  augment_data: false
  batch_size: 4
  num_classes: 2
model:
  nonlinearity: ReLU
  enable_bias: true
  encoder_filters: [8, 16, 32]
  decoder_filters: [16, 8]
  initializer: {name: glorot_uniform, gain: 1.0}
  bias_initializer: zeros
  loss: bce
optimizer:
  optimizer_type: Adam
  learning_rate: 0.01
runconfig:
  max_steps: 60
  eval_frequency: 60
  eval_steps: 1
  log_steps: 10
  seed: 1
)");
  const auto run = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                             " --mode train_and_eval --model_dir " + (dir / "run"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.output, m, std::regex("Metric: eval/accuracy = ([0-9.e+-]+)"))) << run.output;
  EXPECT_GT(std::stod(m[1]), 0.9) << run.output;
}

// SKM-TEA volumes as modelzoo reads them: (X, Y, Z) echoes to (C, Z, X, Y)
// normalized per channel, one-hot tissues aggregated to class ids (the
// first tissue wins), checked against numpy doing modelzoo's steps; a 3D
// UNet trains on them with the Dice + cross-entropy loss.
TEST(SkmData, VolumesAndTissueClassesFollowModelzoosSteps) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  const auto r = zoo::testing::run_command(
      "/usr/bin/python3 -c \"\nimport h5py, numpy as np, os, json\n"
      "root = '" +
      (dir / "skm") +
      "'\n"
      "os.makedirs(root + '/image_files'); os.makedirs(root + '/annotations/v1.0.0')\n"
      "rng = np.random.default_rng(7)\n"
      "for split, names in [('train', ['b.h5', 'a.h5', 'c.h5']), ('val', ['v.h5'])]:\n"
      "    json.dump({'images': [{'file_name': n} for n in names]}, open(f'{root}/annotations/v1.0.0/{split}.json', "
      "'w'))\n"
      "    for n in names:\n"
      "        seg = (rng.random((8, 8, 4, 6)) < 0.15).astype(np.uint8)\n"
      "        e1 = rng.integers(0, 300, (8, 8, 4)).astype(np.int16) + 200 * seg[..., 1]\n"
      "        e2 = rng.integers(0, 300, (8, 8, 4)).astype(np.int16)\n"
      "        with h5py.File(f'{root}/image_files/{n}', 'w') as f:\n"
      "            f['echo1'] = e1; f['echo2'] = e2; f['seg'] = seg\n"
      "        if n == 'a.h5':\n"
      "            x = e1.astype(np.float32)[None].transpose(0, 3, 1, 2)\n"
      "            x = (x - x.mean()) / x.std(ddof=1)\n"
      "            agg = np.stack([seg[..., 0], seg[..., 1], seg[..., 2] | seg[..., 3], seg[..., 4] | seg[..., 5]], "
      "-1)\n"
      "            ids = np.argmax(np.insert(agg, 0, 0, axis=-1), -1).transpose(2, 0, 1)\n"
      "            open(root + '/a_input.bin', 'wb').write(x.astype(np.float32).tobytes())\n"
      "            open(root + '/a_labels.bin', 'wb').write(ids.astype(np.int64).tobytes())\n\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  YAML::Node n = YAML::Load(
      "{data_processor: SkmDataProcessor, batch_size: 1, image_shape: [4, 8, 8], "
      "echo_type: echo1, normalize_data_method: standard_score, num_classes: 5}");
  n["data_dir"] = dir / "skm";
  const auto options = data::SkmOptions::schema().parse(n, config::Context{"p.yaml", "train_input"});
  data::SkmSource source(dir / "skm", "train", options);
  ASSERT_EQ(source.num_samples(), 3);
  const auto batch = source.read_batch({0}, std::nullopt);  // a.h5, the first in sorted order
  const torch::Tensor input = zoo::testing::read_raw(dir / "skm/a_input.bin", torch::kFloat, {1, 4, 8, 8});
  const torch::Tensor labels = zoo::testing::read_raw(dir / "skm/a_labels.bin", torch::kLong, {4, 8, 8});
  EXPECT_LT((batch.at("input")[0] - input).abs().max().item<double>(), 1e-5);
  EXPECT_TRUE(torch::equal(batch.at("labels")[0], labels));
  EXPECT_GT(labels.gt(0).sum().item<int64_t>(), 0);

  const std::string params = zoo::testing::write_file(dir / "p.yaml", R"(
train_input: &train_input
  data_processor: SkmDataProcessor
  data_dir: )" + (dir / "skm") + R"(
  echo_type: echo1-echo2-mc
  aggregate_cartilage: true
  image_shape: [4, 8, 8]
  normalize_data_method: standard_score
  shuffle: true
  shuffle_seed: 1234
  batch_size: 1
  num_classes: 5
eval_input:
  <<: *train_input
  augment_data: false
  shuffle: false
model:
  nonlinearity: relu
  input_channels: 2
  use_conv3d: true
  encoder_filters: [4, 8]
  decoder_filters: [4]
  norm_layer: group_instance
  downscale_method: strided_conv
  initializer: {name: glorot_uniform, gain: 1.0}
  bias_initializer: zeros
  loss: ssce_dice
optimizer:
  optimizer_type: Adam
  learning_rate: 0.01
runconfig:
  max_steps: 6
  eval_frequency: 6
  eval_steps: 1
  log_steps: 1
  seed: 1
)");
  const auto run = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                             " --mode train_and_eval --model_dir " + (dir / "run"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(zoo::testing::train_losses(run.output).size(), 6u) << run.output;
  EXPECT_NE(run.output.find("Metric: eval/mean_iou"), std::string::npos) << run.output;
}
