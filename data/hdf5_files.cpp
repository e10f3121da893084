// Implementation of data/hdf5_files.h with the HDF5 C API.
#include "data/hdf5_files.h"

#include <hdf5.h>

#include <algorithm>
#include <stdexcept>

namespace zoo::data {

Hdf5Files::Hdf5Files(const std::vector<std::string>& paths, const std::vector<std::string>& datasets,
                     const std::string& expected) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors come back as messages, not stderr dumps
  for (const auto& path : paths) {
    File file;
    file.path = path;
    file.file_id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file.file_id < 0) throw std::runtime_error(path + ": not a readable HDF5 file");
    files_.push_back(file);  // closed by the destructor from here on
    for (const auto& name : datasets) {
      const hid_t d = H5Dopen2(files_.back().file_id, name.c_str(), H5P_DEFAULT);
      if (d < 0) throw std::runtime_error(path + ": no dataset '" + name + "' (" + expected + ")");
      files_.back().dataset_ids.push_back(d);
      hid_t space = H5Dget_space(d);
      const int rank = H5Sget_simple_extent_ndims(space);
      std::vector<hsize_t> dims(std::max(rank, 0), 0);
      if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
      H5Sclose(space);
      files_.back().shapes.emplace_back(dims.begin(), dims.end());
      check_fully_written(d, path, name);
      hid_t type = H5Dget_type(d);
      const bool integer = H5Tget_class(type) == H5T_INTEGER;
      H5Tclose(type);
      if (!integer)
        throw std::runtime_error(path + ": dataset '" + name + "' does not hold integers (" + expected + ")");
    }
  }
}

Hdf5Files::~Hdf5Files() {
  for (auto& f : files_) {
    for (int64_t d : f.dataset_ids) H5Dclose(d);
    H5Fclose(f.file_id);
  }
}

void Hdf5Files::check_fully_written(int64_t dataset_id, const std::string& path, const std::string& name) {
  const hid_t d = static_cast<hid_t>(dataset_id);
  hid_t space = H5Dget_space(d);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(std::max(rank, 0));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  const hssize_t elements = H5Sget_simple_extent_npoints(space);
  H5Sclose(space);
  if (elements <= 0) return;
  hid_t plist = H5Dget_create_plist(d);
  bool whole = true;
  if (H5Pget_layout(plist) == H5D_CHUNKED) {
    // Every chunk of the grid must be stored (space status reports compressed chunks as "partly allocated").
    std::vector<hsize_t> chunk(dims.size());
    hsize_t expected = 1, stored = 0;
    hid_t file_space = H5Dget_space(d);  // HDF5 1.10 refuses H5S_ALL here
    const bool counted =
        H5Pget_chunk(plist, rank, chunk.data()) == rank && H5Dget_num_chunks(d, file_space, &stored) >= 0;
    H5Sclose(file_space);
    if (counted) {
      for (size_t k = 0; k < dims.size(); ++k) expected *= chunk[k] ? (dims[k] + chunk[k] - 1) / chunk[k] : 1;
      whole = stored >= expected;
    }
  } else {
    H5D_space_status_t status = H5D_SPACE_STATUS_ALLOCATED;
    whole = H5Dget_space_status(d, &status) < 0 || status != H5D_SPACE_STATUS_NOT_ALLOCATED;
  }
  H5Pclose(plist);
  if (!whole)
    throw std::runtime_error(path + ": dataset '" + name +
                             "' has chunks that were never written (a truncated or "
                             "damaged file); they would read as zeros");
}

std::vector<int64_t> Hdf5Files::shape(size_t file, size_t d) const { return files_[file].shapes[d]; }

std::string Hdf5Files::shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

void Hdf5Files::set_counts(const std::vector<int64_t>& counts) {
  total_ = 0;
  for (size_t k = 0; k < files_.size(); ++k) {
    files_[k].first = total_;
    files_[k].count = counts[k];
    total_ += counts[k];
  }
}

std::string Hdf5Files::describe() const {
  return files_.empty() ? "HDF5 data" : files_.front().path + (files_.size() > 1 ? " and others" : "");
}

std::vector<std::pair<int64_t, int64_t>> Hdf5Files::ranges() const {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& f : files_) out.emplace_back(f.first, f.count);
  return out;
}

std::pair<size_t, int64_t> Hdf5Files::locate(int64_t i) const {
  if (i < 0 || i >= total_) throw std::out_of_range("HDF5 sample index " + std::to_string(i) + " out of range");
  // The last file starting at or before i (empty files share a start; skip past them).
  auto it = std::upper_bound(files_.begin(), files_.end(), i, [](int64_t x, const File& f) { return x < f.first; });
  const size_t k = static_cast<size_t>(std::prev(it) - files_.begin());
  return {k, i - files_[k].first};
}

void Hdf5Files::read(int64_t i, size_t d, int32_t* out) const {
  const auto [k, row] = locate(i);
  const hid_t dataset = files_[k].dataset_ids[d];
  std::vector<hsize_t> count;
  for (int64_t n : files_[k].shapes[d]) count.push_back(static_cast<hsize_t>(n));
  std::vector<hsize_t> start(count.size(), 0);
  start[0] = static_cast<hsize_t>(row);
  count[0] = 1;
  hid_t space = H5Dget_space(dataset);
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  hid_t mem = H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr);
  const herr_t status = H5Dread(dataset, H5T_NATIVE_INT32, mem, space, H5P_DEFAULT, out);
  H5Sclose(mem);
  H5Sclose(space);
  if (status < 0)
    throw std::runtime_error(files_[k].path + ": cannot read sample " + std::to_string(row) + " of dataset " +
                             std::to_string(d));
}

}  // namespace zoo::data
