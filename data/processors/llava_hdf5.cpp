// Implementation of data/processors/llava_hdf5.h.
#include "data/processors/llava_hdf5.h"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>

#include "data/image.h"
#include "data/splitmix.h"

namespace zoo::data {

namespace {

// The keys both image-and-text processors read (T: the options struct).
template <class T>
config::Schema<T>& add_image_text_fields(config::Schema<T>& s) {
  using O = LlavaHdf5Options;
  return add_loader_fields(s)
      .field("img_data_dir", static_cast<std::string T::*>(&O::img_data_dir),
             "Directory the samples' img_path entries are relative to.")
      .field("image_data_size", static_cast<std::vector<int64_t> T::*>(&O::image_data_size),
             "[C, H, W] of each image after the transforms.")
      .field("transforms", static_cast<std::vector<TransformSpec> T::*>(&O::transforms),
             "Image transforms in order, e.g. expand_to_square, resize, center_crop, to_tensor, normalize.")
      .field("max_sequence_length", static_cast<std::optional<int64_t> T::*>(&O::max_sequence_length),
             "Checked against the files' sequence length when set.", config::if_set(config::positive<int64_t>()))
      .field("use_vsl", static_cast<bool T::*>(&O::use_vsl),
             "Variable-sequence-length rows (modelzoo's image processors have none; must be false).")
      .field("use_worker_cache", static_cast<bool T::*>(&O::use_worker_cache),
             "Copy data to worker-local storage (Cerebras clusters).")
      .field("sort_files", static_cast<bool T::*>(&O::sort_files),
             "Read the files in sorted order (zoo always does; false is refused).")
      .ignored({"vocab_size"}, "deprecated and unused in modelzoo's HDF5 processors")
      .ignored({"bos_token_id", "pad_token_id"}, "the preprocessing wrote the tokens; reading them needs neither")
      .ignored({"mixed_precision", "fp16_type"}, "the model's precision keys decide it");
}

// The checks both processors make of those keys.
template <class Fail>
void check_image_text_fields(const LlavaHdf5Options& o, const Fail& fail) {
  if (o.img_data_dir.empty()) fail("img_data_dir", "required: the directory of the samples' images");
  if (o.image_data_size.size() != 3) fail("image_data_size", "required: [C, H, W], e.g. [3, 336, 336]");
  for (int64_t v : o.image_data_size)
    if (v <= 0) fail("image_data_size", "expected sizes > 0");
  if (o.image_data_size[0] != 3) fail("image_data_size", "the images are read as RGB: C must be 3");
  if (o.use_vsl) fail("use_vsl", "modelzoo's image processors have no variable-sequence-length training either");
  if (!o.sort_files) fail("sort_files", "zoo reads the files in sorted order only");
}

}  // namespace

const config::Schema<LlavaHdf5Options>& LlavaHdf5Options::schema() {
  using O = LlavaHdf5Options;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (LlavaHDF5MapDataProcessor)",
                         "modelzoo LLaVA samples (*.h5: 'data' int32 (n, 4, msl), 'img_path' (n, 1) strings) and the "
                         "images they name.");
    add_image_text_fields(sc).validate([](const O& o, const auto& fail) { check_image_text_fields(o, fail); });
    return sc;
  }();
  return s;
}

const config::Schema<MultimodalSimpleHdf5Options>& MultimodalSimpleHdf5Options::schema() {
  using O = MultimodalSimpleHdf5Options;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc(
        "train_input/eval_input (MultimodalSimpleHDF5MapDataProcessor)",
        "modelzoo multimodal_simple samples (*.h5: 'data' int32 (n, 5, msl), 'img_path' (n, "
        "max_num_img) strings, 'img_data_loc' (n, max_num_img, num_patches)) and the images they name.");
    add_image_text_fields(sc)
        .field("max_num_img", &O::max_num_img, "Image slots per sample (img_path's second dimension).",
               config::positive<int64_t>())
        .field("num_patches", &O::num_patches,
               "Image features per image (img_data_loc's last dimension): checked against the files' when set.",
               config::if_set(config::positive<int64_t>()))
        .ignored({"noaugment"}, "deprecated and unused in modelzoo's multimodal_simple processor")
        .validate([](const O& o, const auto& fail) { check_image_text_fields(o, fail); });
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
    if (H5Dread(dataset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, items.data()) < 0)
      error = path + ": cannot read '" + name + "'";
    for (char* c : items) out.emplace_back(c ? c : "");
    const hid_t all = H5Dget_space(dataset);
    if (error.empty()) H5Dvlen_reclaim(mem, all, H5P_DEFAULT, items.data());
    H5Sclose(all);
    H5Tclose(mem);
  } else {
    const size_t width = H5Tget_size(type);
    std::vector<char> bytes(static_cast<size_t>(n) * width);
    if (H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) < 0)
      error = path + ": cannot read '" + name + "'";
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
const std::vector<std::string> kMultimodalSimpleRows = {"text_input_ids", "loss_mask", "labels", "key_padding_mask",
                                                        "token_modality_idx"};
}  // namespace

ImageTextSampleSource::ImageTextSampleSource(const std::vector<std::string>& files, const LlavaHdf5Options& o,
                                             ImageTextLayout layout)
    : layout_(std::move(layout)),
      rows_(std::make_shared<Hdf5SampleSource>(files, o.max_sequence_length, std::nullopt, layout_.rows)),
      img_data_dir_(o.img_data_dir),
      image_size_(o.image_data_size),
      transforms_(o.transforms),
      seed_(o.shuffle_seed) {
  text_ = std::make_shared<Hdf5RowView>(rows_, std::array<int64_t, 3>{0, 1, 2}, "text");
  const auto ranges = rows_->file_ranges();
  const int64_t k = slots();
  for (size_t f = 0; f < files.size(); ++f) {
    std::vector<std::string> paths = read_hdf5_strings(files[f], "img_path");
    if (static_cast<int64_t>(paths.size()) != ranges[f].second * k)
      throw std::runtime_error(files[f] + ": dataset 'img_path' holds " + std::to_string(paths.size()) +
                               " strings for " + std::to_string(ranges[f].second) + " samples; expected " +
                               (k == 1 ? std::string("one image path") : std::to_string(k) + " image paths") +
                               " (or \"None\") per sample" +
                               (layout_.image_slots ? " (max_num_img: " + std::to_string(k) + ")" : ""));
    image_paths_.insert(image_paths_.end(), paths.begin(), paths.end());
  }
  if (!layout_.image_slots) return;
  locations_ = std::make_shared<Hdf5Files>(files, std::vector<std::string>{"img_data_loc"},
                                           "multimodal_simple samples with 'img_data_loc'");
  std::optional<int64_t> patches = layout_.patches;
  for (size_t f = 0; f < files.size(); ++f) {
    const std::vector<int64_t> shape = locations_->shape(f, 0);
    const bool fits = shape.size() == 3 && shape[0] == ranges[f].second && shape[1] == k && shape[2] > 0 &&
                      (!patches || shape[2] == *patches);
    if (!fits)
      throw std::runtime_error(
          files[f] + ": dataset 'img_data_loc' is " + Hdf5Files::shape_text(shape) + ", expected (" +
          std::to_string(ranges[f].second) + ", " + std::to_string(k) + " (max_num_img), " +
          (patches ? std::to_string(*patches) + (layout_.patches ? " (num_patches)" : " (as the files before)")
                   : std::string("the features per image")) +
          ")");
    patches = shape[2];
  }
  locations_->set_counts([&] {
    std::vector<int64_t> counts;
    for (const auto& r : ranges) counts.push_back(r.second);
    return counts;
  }());
  layout_.patches = patches;
}

int64_t ImageTextSampleSource::num_samples() const { return rows_->num_samples(); }
std::string ImageTextSampleSource::describe() const { return rows_->describe(); }
std::optional<int64_t> ImageTextSampleSource::tokens_per_sample() const { return rows_->sequence_length(); }

Features ImageTextSampleSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  const int64_t n = num_samples(), B = static_cast<int64_t>(ids.size()), T = rows_->sequence_length(), k = slots();
  std::vector<int64_t> samples;
  for (int64_t id : ids) samples.push_back(id % n);
  const Features text = text_->read_batch(samples, vocab_size);
  Features out = {{"text_input_ids", text.at("input_ids")},
                  {"loss_mask", text.at("attention_mask")},
                  {"labels", text.at("labels")}};
  // The 0/1 rows after the LM ones (key_padding_mask, token_modality_idx):
  // up to three from one read of a sample.
  const int64_t flags = static_cast<int64_t>(layout_.rows.size()) - 3;
  std::vector<torch::Tensor> flag_rows;
  for (int64_t r = 0; r < flags; ++r) flag_rows.push_back(torch::empty({B, T}, torch::kInt));
  std::vector<int32_t> read(static_cast<size_t>(3 * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t first = 0; first < flags; first += 3) {
      std::array<int64_t, 3> at;
      for (int64_t i = 0; i < 3; ++i) at[i] = 3 + std::min(first + i, flags - 1);
      rows_->read_rows(samples[b], at, read.data(), read.data() + T, read.data() + 2 * T);
      for (int64_t r = first; r < std::min(first + 3, flags); ++r) {
        const int32_t* row = read.data() + (r - first) * T;
        for (int64_t t = 0; t < T; ++t)
          if (row[t] != 0 && row[t] != 1)
            throw std::runtime_error(rows_->locate(samples[b]) + ", position " + std::to_string(t) + ": " +
                                     layout_.rows[3 + r] + " is " + std::to_string(row[t]) + ", expected 0 or 1");
        std::copy(row, row + T, flag_rows[r].data_ptr<int32_t>() + b * T);
      }
    }
  for (int64_t r = 0; r < flags; ++r) out[layout_.rows[3 + r]] = flag_rows[r].to(torch::kLong);
  if (locations_) {
    const int64_t P = *layout_.patches;
    torch::Tensor where = torch::empty({B, k, P}, torch::kInt);
    for (int64_t b = 0; b < B; ++b) {
      int32_t* loc = where.data_ptr<int32_t>() + b * k * P;
      locations_->read(samples[b], 0, loc);
      for (int64_t j = 0; j < k * P; ++j)
        if (loc[j] < 0 || loc[j] > T)
          throw std::runtime_error(rows_->locate(samples[b]) + ": img_data_loc of image " + std::to_string(j / P) +
                                   " holds position " + std::to_string(loc[j]) + ", expected 0 .. " +
                                   std::to_string(T - 1) + " (or " + std::to_string(T) + ": an unused slot)");
    }
    out["image_data_loc"] = where.to(torch::kLong);
  }
  std::vector<torch::Tensor> images;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < k; ++j) {
      const std::string& relative = image_paths_[static_cast<size_t>(samples[b] * k + j)];
      // modelzoo's stand-in for an absent image: a black RGB image of image_data_size.
      const torch::Tensor raw = relative == "None"
                                    ? torch::zeros({3, image_size_[1], image_size_[2]}, torch::kByte)
                                    : read_image((std::filesystem::path(img_data_dir_) / relative).string(), 3);
      // Drawn from the seed, the epoch, the sample and the slot: the same on a resumed run.
      const uint64_t seed = (SplitMix64::mix(uint64_t(seed_)) ^ uint64_t(ids[b])) + uint64_t(j) * 0x9E3779B97F4A7C15ull;
      torch::Tensor image = transforms_.apply(raw, seed);
      if (!image.is_floating_point()) image = image.to(torch::kFloat).div_(255.0f);
      const std::vector<int64_t> shape(image.sizes().begin(), image.sizes().end());
      if (shape != image_size_)
        throw std::runtime_error(rows_->locate(samples[b]) + ": its image " + relative + " is " +
                                 c10::str(image.sizes()) + " after the transforms, but image_data_size is " +
                                 c10::str(c10::IntArrayRef(image_size_)) + " (the image model's input)");
      images.push_back(image);
    }
  }
  torch::Tensor batch = torch::stack(images);
  if (layout_.image_slots) batch = batch.view({B, k, image_size_[0], image_size_[1], image_size_[2]});
  out["image_data"] = batch;
  return out;
}

namespace {

std::unique_ptr<DataLoader> open_image_text(const LlavaHdf5Options& o, const config::Origin& at,
                                            const ImageTextLayout& layout) {
  const std::vector<std::string> files = sorted_hdf5_files(o.data_dir, at);
  if (!std::filesystem::is_directory(o.img_data_dir))
    at.fail("img_data_dir", "'" + o.img_data_dir + "' is not a directory");
  return open_map_hdf5(o, at, [&] { return std::make_shared<ImageTextSampleSource>(files, o, layout); });
}

}  // namespace

DataProcessor llava_hdf5_processor() {
  return make_data_processor<LlavaHdf5Options>(
      "LlavaHDF5MapDataProcessor",
      "modelzoo LLaVA samples, map-style: token rows from *.h5 files and each sample's image (img_path under "
      "img_data_dir, through `transforms`); shuffling permutes all samples each epoch.",
      {"text_input_ids", "loss_mask", "labels", "key_padding_mask", "image_data"},
      [](const LlavaHdf5Options& o, const config::Origin& at) {
        return open_image_text(o, at, ImageTextLayout{kLlavaRows, std::nullopt, std::nullopt});
      });
}

DataProcessor multimodal_simple_hdf5_processor() {
  return make_data_processor<MultimodalSimpleHdf5Options>(
      "MultimodalSimpleHDF5MapDataProcessor",
      "modelzoo multimodal_simple samples, map-style: token rows from *.h5 files, max_num_img images per sample "
      "(img_path under img_data_dir, through `transforms`; None: a black stand-in) and where each image's features "
      "go (img_data_loc); shuffling permutes all samples each epoch.",
      {"text_input_ids", "loss_mask", "labels", "key_padding_mask", "token_modality_idx", "image_data",
       "image_data_loc"},
      [](const MultimodalSimpleHdf5Options& o, const config::Origin& at) {
        return open_image_text(o, at, ImageTextLayout{kMultimodalSimpleRows, o.max_num_img, o.num_patches});
      });
}

}  // namespace zoo::data
