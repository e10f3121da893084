// Implementation of data/processors/unet_hdf5.h with the HDF5 C API.
#include "data/processors/unet_hdf5.h"

#include <hdf5.h>

#include <algorithm>
#include <stdexcept>

#include "data/processors/gpt_hdf5.h"

namespace zoo::data {

const config::Schema<UNetHdf5Options>& UNetHdf5Options::schema() {
  using O = UNetHdf5Options;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (Hdf5DataProcessor)",
                         "modelzoo R1.x UNet HDF5 files (example_<k>/image and /label groups).");
    add_unet_input_fields(sc).ignored({"shuffle_buffer"}, "zoo shuffles the whole map-style set each epoch");
    return sc;
  }();
  return s;
}

UNetHdf5Source::UNetHdf5Source(const std::vector<std::string>& files, const UNetHdf5Options& o)
    : options_(o), paths_(files) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors come back as messages, not stderr dumps
  for (const auto& path : paths_) {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) throw std::runtime_error(path + ": not a readable HDF5 file");
    file_ids_.push_back(f);  // closed by the destructor from here on
    int64_t n = -1;
    if (H5Aexists(f, "n_examples") > 0) {
      const hid_t a = H5Aopen(f, "n_examples", H5P_DEFAULT);
      long long v = -1;
      if (a >= 0 && H5Aread(a, H5T_NATIVE_LLONG, &v) >= 0) n = v;
      if (a >= 0) H5Aclose(a);
    }
    if (n < 0)
      throw std::runtime_error(path +
                               ": no attribute n_examples (modelzoo's create_hdf5_files.py writes it with "
                               "example_<k> groups)");
    firsts_.push_back(total_);
    total_ += n;
  }
  if (total_ == 0) throw std::runtime_error(describe() + ": no examples");
}

UNetHdf5Source::~UNetHdf5Source() {
  for (int64_t f : file_ids_) H5Fclose(f);
}

std::string UNetHdf5Source::describe() const {
  return paths_.empty() ? "" : paths_.front() + (paths_.size() > 1 ? " and others" : "");
}

torch::Tensor read_hdf5_floats(int64_t file_id, const std::string& name, const std::string& where) {
  const hid_t d = H5Dopen2(file_id, name.c_str(), H5P_DEFAULT);
  if (d < 0) throw std::runtime_error(where + ": no such dataset");
  const hid_t space = H5Dget_space(d);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(std::max(rank, 0), 0);
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  H5Sclose(space);
  torch::Tensor out = torch::empty(std::vector<int64_t>(dims.begin(), dims.end()), torch::kFloat);
  const herr_t status = H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data_ptr<float>());
  H5Dclose(d);
  if (status < 0) throw std::runtime_error(where + ": cannot be read as numbers");
  return out;
}

torch::Tensor UNetHdf5Source::read(size_t f, int64_t k, const std::string& name) const {
  const std::string dataset = "example_" + std::to_string(k) + "/" + name;
  return read_hdf5_floats(file_ids_[f], dataset, paths_[f] + ", " + dataset);
}

Features UNetHdf5Source::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t>) const {
  const std::vector<int64_t>& shape = options_.image_shape;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> samples;
  for (int64_t id : ids) {
    const int64_t i = id % total_;
    const size_t f = static_cast<size_t>(std::upper_bound(firsts_.begin(), firsts_.end(), i) - firsts_.begin() - 1);
    const int64_t k = i - firsts_[f];
    const torch::Tensor image = read(f, k, "image");
    if (image.sizes() != torch::IntArrayRef({shape[2], shape[0], shape[1]}))
      throw std::runtime_error(paths_[f] + ", example_" + std::to_string(k) + "/image: shape " +
                               c10::str(image.sizes()) + ", expected (C, H, W) = " +
                               c10::str(torch::IntArrayRef({shape[2], shape[0], shape[1]})) + " from image_shape");
    torch::Tensor label = read(f, k, "label");
    // To one (1, H, W) class-id map, whichever layout the file was written for.
    if (label.dim() == 2) label = label.unsqueeze(0);
    if (label.dim() == 3 && label.size(0) > 1) label = label.argmax(0, true);
    if (label.dim() != 3 || label.size(1) != shape[0] || label.size(2) != shape[1])
      throw std::runtime_error(paths_[f] + ", example_" + std::to_string(k) + "/label: shape " +
                               c10::str(label.sizes()) + " does not match image_shape");
    samples.push_back(unet_sample(image, label.round().to(torch::kByte), options_, id,
                                  [](const torch::Tensor& m, int64_t, int64_t) { return m; }));
  }
  return stack_samples(samples);
}

namespace {

std::unique_ptr<DataLoader> open_unet_hdf5(const UNetHdf5Options& given, const config::Origin& at) {
  std::shared_ptr<UNetHdf5Source> source;
  try {
    source = std::make_shared<UNetHdf5Source>(sorted_hdf5_files(given.data_dir, at), given);
  } catch (const config::ConfigError&) {
    throw;  // already names the file and key
  } catch (const std::runtime_error& e) {
    at.fail("data_dir", e.what());
  }
  return std::make_unique<MapStyleLoader>(source, given);
}

}  // namespace

DataProcessor unet_hdf5_processor() {
  return make_data_processor<UNetHdf5Options>("Hdf5DataProcessor",
                                              "modelzoo R1.x UNet HDF5 samples (example_<k>/image, /label).",
                                              {"input", "labels"}, open_unet_hdf5);
}

}  // namespace zoo::data
