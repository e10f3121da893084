// Implementation of data/processors/mnist.h; zlib reads raw and gzipped files alike.
#include "data/processors/mnist.h"

#include <zlib.h>

#include <filesystem>
#include <stdexcept>

namespace zoo::data {

const config::Schema<MnistOptions>& MnistOptions::schema() {
  using O = MnistOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (MNISTDataProcessor)",
                         "MNIST IDX files (train-images-idx3-ubyte, ... raw or .gz) in data_dir, data_dir/MNIST/raw "
                         "or data_dir/raw.");
    add_loader_fields(sc)
        .field("split", &O::split,
               "train, or test (val: the same, as modelzoo's fc_mnist reads it); default: test for eval_input and "
               "val_dataloader, else train.",
               config::one_of({"", "train", "test", "val"}))
        .field("drop_last_batch", &O::drop_last_batch,
               "modelzoo's FC-MNIST name for drop_last: only full batches (the remainder carries over).")
        .field("to_float16", &O::to_float16,
               "Accepted for modelzoo configs; zoo keeps inputs float32 and leaves precision to mixed_precision.");
    return sc;
  }();
  return s;
}

IdxArray read_idx(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error(path + ": cannot open");
  auto read = [&](void* dst, size_t n) { return gzread(f, dst, static_cast<unsigned>(n)) == static_cast<int>(n); };
  IdxArray a;
  unsigned char magic[4];
  bool ok = read(magic, 4);
  if (!ok || magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] == 0 || magic[3] > 4) {
    gzclose(f);
    throw std::runtime_error(path + ": not an IDX file of unsigned bytes (expected magic 00 00 08 <rank>)");
  }
  int64_t count = 1;
  for (int d = 0; d < magic[3] && ok; ++d) {
    unsigned char b[4];
    ok = read(b, 4);
    a.dims.push_back((int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3]);
    count *= a.dims.back();
  }
  if (ok) {
    a.values.resize(static_cast<size_t>(count));
    ok = count == 0 || read(a.values.data(), a.values.size());
  }
  gzclose(f);
  if (!ok) throw std::runtime_error(path + ": truncated (fewer values than its dimensions say)");
  return a;
}

MnistSource::MnistSource(const std::string& images_file, const std::string& labels_file) : images_file_(images_file) {
  IdxArray images = read_idx(images_file), labels = read_idx(labels_file);
  if (images.dims.size() != 3)
    throw std::runtime_error(images_file + ": expected images of rank 3 (n, rows, cols), got rank " +
                             std::to_string(images.dims.size()));
  if (labels.dims.size() != 1)
    throw std::runtime_error(labels_file + ": expected labels of rank 1, got rank " +
                             std::to_string(labels.dims.size()));
  if (images.dims[0] != labels.dims[0])
    throw std::runtime_error(images_file + " holds " + std::to_string(images.dims[0]) + " images but " + labels_file +
                             " holds " + std::to_string(labels.dims[0]) + " labels");
  for (uint8_t l : labels.values)
    if (l > 9) throw std::runtime_error(labels_file + ": label " + std::to_string(l) + " is not a digit 0-9");
  image_shape_ = {1, images.dims[1], images.dims[2]};
  pixels_ = images.dims[1] * images.dims[2];
  images_ = std::move(images.values);
  labels_ = std::move(labels.values);
}

Features MnistSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t>) const {
  const int64_t B = static_cast<int64_t>(ids.size());
  torch::Tensor pixels = torch::empty({B, pixels_}, torch::kByte), labels = torch::empty({B}, torch::kLong);
  for (int64_t b = 0; b < B; ++b) {
    std::copy_n(images_.data() + ids[b] * pixels_, pixels_, pixels.data_ptr<uint8_t>() + b * pixels_);
    labels.data_ptr<int64_t>()[b] = labels_[ids[b]];
  }
  std::vector<int64_t> shape = {B};
  shape.insert(shape.end(), image_shape_.begin(), image_shape_.end());
  const torch::Tensor input = (pixels.to(torch::kFloat).div_(255.0f).sub_(0.1307f).div_(0.3081f)).view(shape);
  return {{"input", input}, {"labels", labels}};
}

namespace {

// The first existing "<dir>/<name>" or "<dir>/<name>.gz" among the usual places.
std::string find_idx(const std::string& data_dir, const std::string& name) {
  for (const char* sub : {"", "/MNIST/raw", "/raw"})
    for (const char* ext : {"", ".gz"}) {
      const std::string p = data_dir + sub + "/" + name + ext;
      if (std::filesystem::is_regular_file(p)) return p;
    }
  return "";
}

std::unique_ptr<DataLoader> open_mnist(const MnistOptions& given, const config::Origin& at) {
  if (given.data_dir.items.size() != 1) at.fail("data_dir", "required: the one directory holding MNIST");
  const std::string dir = require_directory(given.data_dir.items.front(), at);
  const bool eval_section = is_eval_section(at);
  const std::string split = !given.split.empty() ? given.split : eval_section ? "test" : "train";
  const std::string prefix = split == "train" ? "train" : "t10k";
  const std::string images = find_idx(dir, prefix + "-images-idx3-ubyte"),
                    labels = find_idx(dir, prefix + "-labels-idx1-ubyte");
  if (images.empty() || labels.empty())
    at.fail("data_dir", "no MNIST " + split + " split in '" + dir + "': expected " + prefix +
                            "-images-idx3-ubyte and " + prefix +
                            "-labels-idx1-ubyte (or .gz) there, in MNIST/raw/ or in raw/");
  std::shared_ptr<MnistSource> source;
  try {
    source = std::make_shared<MnistSource>(images, labels);
  } catch (const std::exception& e) {
    at.fail("data_dir", e.what());
  }
  return std::make_unique<MapStyleLoader>(source, given);
}

}  // namespace

DataProcessor mnist_processor() {
  return make_data_processor<MnistOptions>("MNISTDataProcessor",
                                           "MNIST digits from IDX files (images normalized as torchvision does).",
                                           {"input", "labels"}, open_mnist);
}

}  // namespace zoo::data
