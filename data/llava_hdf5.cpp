// Implementation of data/llava_hdf5.h.
#include "data/llava_hdf5.h"

#include <hdf5.h>

#include <filesystem>

#include "data/image.h"
#include "data/splitmix.h"

namespace zoo::data {

const config::Schema<LlavaHdf5Options>& LlavaHdf5Options::schema() {
  using O = LlavaHdf5Options;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (LlavaHDF5MapDataProcessor)",
                         "modelzoo LLaVA samples (*.h5: 'data' int32 (n, 4, msl), 'img_path' (n, 1) strings) and the "
                         "images they name.");
    add_loader_fields(sc)
        .field("img_data_dir", &O::img_data_dir, "Directory the samples' img_path entries are relative to.")
        .field("image_data_size", &O::image_data_size, "[C, H, W] of each image after the transforms.")
        .field("transforms", &O::transforms,
               "Image transforms in order, e.g. expand_to_square, resize, center_crop, to_tensor, normalize.")
        .field("max_sequence_length", &O::max_sequence_length, "Checked against the files' sequence length when set.",
               config::if_set(config::positive<int64_t>()))
        .field("use_vsl", &O::use_vsl, "Variable-sequence-length rows (modelzoo's LLaVA has none; must be false).")
        .field("use_worker_cache", &O::use_worker_cache, "Copy data to worker-local storage (Cerebras clusters).")
        .field("sort_files", &O::sort_files, "Read the files in sorted order (zoo always does; false is refused).")
        .ignored({"vocab_size"}, "deprecated and unused in modelzoo's HDF5 processors")
        .ignored({"bos_token_id", "pad_token_id"}, "the preprocessing wrote the tokens; reading them needs neither")
        .ignored({"mixed_precision", "fp16_type"}, "the model's precision keys decide it")
        .validate([](const O& o, const auto& fail) {
          if (o.img_data_dir.empty()) fail("img_data_dir", "required: the directory of the samples' images");
          if (o.image_data_size.size() != 3) fail("image_data_size", "required: [C, H, W], e.g. [3, 336, 336]");
          for (int64_t v : o.image_data_size)
            if (v <= 0) fail("image_data_size", "expected sizes > 0");
          if (o.image_data_size[0] != 3) fail("image_data_size", "LLaVA's images are RGB: C must be 3");
          if (o.use_vsl) fail("use_vsl", "modelzoo's LLaVA processor has no variable-sequence-length training either");
          if (!o.sort_files) fail("sort_files", "zoo reads the files in sorted order only");
        });
    return sc;
  }();
  return s;
}

std::vector<std::string> read_hdf5_strings(const std::string& path, const std::string& name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) throw std::runtime_error(path + ": not a readable HDF5 file");
  const hid_t dataset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  if (dataset < 0) {
    H5Fclose(file);
    throw std::runtime_error(path + ": no dataset '" + name + "'");
  }
  const hid_t type = H5Dget_type(dataset), space = H5Dget_space(dataset);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  H5Sclose(space);
  std::vector<std::string> out;
  std::string error;
  if (H5Tget_class(type) != H5T_STRING) {
    error = path + ": dataset '" + name + "' does not hold strings";
  } else if (H5Tis_variable_str(type) > 0) {
    const hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_size(mem, H5T_VARIABLE);
    H5Tset_cset(mem, H5Tget_cset(type));  // h5py's str dtype is UTF-8: HDF5 converts no cset into another
    std::vector<char*> items(static_cast<size_t>(n), nullptr);
    if (H5Dread(dataset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, items.data()) < 0) error = path + ": cannot read '" + name + "'";
    for (char* c : items) out.emplace_back(c ? c : "");
    const hid_t all = H5Dget_space(dataset);
    if (error.empty()) H5Dvlen_reclaim(mem, all, H5P_DEFAULT, items.data());
    H5Sclose(all);
    H5Tclose(mem);
  } else {
    const size_t width = H5Tget_size(type);
    std::vector<char> bytes(static_cast<size_t>(n) * width);
    if (H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) < 0) error = path + ": cannot read '" + name + "'";
    for (hssize_t k = 0; k < n; ++k) {
      std::string item(bytes.data() + k * width, width);
      item.erase(item.find_last_not_of('\0') + 1);
      out.push_back(std::move(item));
    }
  }
  H5Tclose(type);
  H5Dclose(dataset);
  H5Fclose(file);
  if (!error.empty()) throw std::runtime_error(error);
  return out;
}

namespace {
const std::vector<std::string> kLlavaRows = {"text_input_ids", "loss_mask", "labels", "key_padding_mask"};
}  // namespace

LlavaSampleSource::LlavaSampleSource(const std::vector<std::string>& files, const LlavaHdf5Options& o)
    : rows_(std::make_shared<Hdf5SampleSource>(files, o.max_sequence_length, std::nullopt, kLlavaRows)),
      img_data_dir_(o.img_data_dir),
      image_size_(o.image_data_size),
      transforms_(o.transforms),
      seed_(o.shuffle_seed) {
  text_ = std::make_shared<Hdf5RowView>(rows_, std::array<int64_t, 3>{0, 1, 2}, "text");
  const auto ranges = rows_->file_ranges();
  for (size_t k = 0; k < files.size(); ++k) {
    std::vector<std::string> paths = read_hdf5_strings(files[k], "img_path");
    if (static_cast<int64_t>(paths.size()) != ranges[k].second)
      throw std::runtime_error(files[k] + ": dataset 'img_path' holds " + std::to_string(paths.size()) +
                               " strings for " + std::to_string(ranges[k].second) +
                               " samples; expected one image path (or \"None\") per sample");
    image_paths_.insert(image_paths_.end(), paths.begin(), paths.end());
  }
}

int64_t LlavaSampleSource::num_samples() const { return rows_->num_samples(); }
std::string LlavaSampleSource::describe() const { return rows_->describe(); }
std::optional<int64_t> LlavaSampleSource::tokens_per_sample() const { return rows_->sequence_length(); }

Features LlavaSampleSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  const int64_t n = num_samples(), B = static_cast<int64_t>(ids.size()), T = rows_->sequence_length();
  std::vector<int64_t> samples;
  for (int64_t id : ids) samples.push_back(id % n);
  Features out = text_->read_batch(samples, vocab_size);
  torch::Tensor padding = torch::empty({B, T}, torch::kInt);
  std::vector<int32_t> unused(static_cast<size_t>(2 * T));
  std::vector<torch::Tensor> images;
  for (int64_t b = 0; b < B; ++b) {
    int32_t* row = padding.data_ptr<int32_t>() + b * T;
    rows_->read_rows(samples[b], {3, 3, 3}, row, unused.data(), unused.data() + T);
    for (int64_t t = 0; t < T; ++t)
      if (row[t] != 0 && row[t] != 1)
        throw std::runtime_error(rows_->locate(samples[b]) + ", position " + std::to_string(t) +
                                 ": key_padding_mask is " + std::to_string(row[t]) + ", expected 0 or 1");
    const std::string& relative = image_paths_[static_cast<size_t>(samples[b])];
    // modelzoo's stand-in for a text-only sample: a black RGB image of image_data_size.
    const torch::Tensor raw = relative == "None"
                                  ? torch::zeros({3, image_size_[1], image_size_[2]}, torch::kByte)
                                  : read_image((std::filesystem::path(img_data_dir_) / relative).string(), 3);
    // Drawn from the seed, the epoch and the sample: the same on a resumed run.
    torch::Tensor image = transforms_.apply(raw, SplitMix64::mix(uint64_t(seed_)) ^ uint64_t(ids[b]));
    if (!image.is_floating_point()) image = image.to(torch::kFloat).div_(255.0f);
    const std::vector<int64_t> shape(image.sizes().begin(), image.sizes().end());
    if (shape != image_size_)
      throw std::runtime_error(rows_->locate(samples[b]) + ": its image " + relative + " is " +
                               c10::str(image.sizes()) + " after the transforms, but image_data_size is " +
                               c10::str(c10::IntArrayRef(image_size_)) + " (the image model's input)");
    images.push_back(image);
  }
  return {{"text_input_ids", out.at("input_ids")}, {"loss_mask", out.at("attention_mask")},
          {"labels", out.at("labels")},            {"key_padding_mask", padding.to(torch::kLong)},
          {"image_data", torch::stack(images)}};
}

namespace {

std::unique_ptr<DataLoader> open_llava(const LlavaHdf5Options& o, const config::Origin& at) {
  const std::vector<std::string> files = sorted_hdf5_files(o.data_dir, at);
  if (!std::filesystem::is_directory(o.img_data_dir)) at.fail("img_data_dir", "'" + o.img_data_dir + "' is not a directory");
  return open_map_hdf5(o, at, [&] { return std::make_shared<LlavaSampleSource>(files, o); });
}

}  // namespace

DataProcessor llava_hdf5_processor() {
  return make_data_processor<LlavaHdf5Options>(
      "LlavaHDF5MapDataProcessor",
      "modelzoo LLaVA samples, map-style: token rows from *.h5 files and each sample's image (img_path under "
      "img_data_dir, through `transforms`); shuffling permutes all samples each epoch.",
      {"text_input_ids", "loss_mask", "labels", "key_padding_mask", "image_data"}, open_llava);
}

}  // namespace zoo::data
