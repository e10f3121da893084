// *.h5 files read as one run of samples, for the processors whose files hold
// more than GptHDF5's one 'data' set (masked-LM 'data' + 'labels', DPR's
// 'data_0' + 'data_1'): each file's named datasets opened once, the samples
// of one file following the last file's. Defines: Hdf5Files.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zoo::data {

class Hdf5Files {
 public:
  // Opens every file and its `datasets`; throws std::runtime_error naming
  // the file (and `expected`, what the files should hold) when one is missing.
  Hdf5Files(const std::vector<std::string>& paths, const std::vector<std::string>& datasets,
            const std::string& expected);
  ~Hdf5Files();
  Hdf5Files(const Hdf5Files&) = delete;
  Hdf5Files& operator=(const Hdf5Files&) = delete;

  size_t size() const { return files_.size(); }
  const std::string& path(size_t file) const { return files_[file].path; }
  // The shape of dataset `d` of `file`; its first dimension counts its samples.
  std::vector<int64_t> shape(size_t file, size_t d) const;
  // "(n, 3, 8)", for messages.
  static std::string shape_text(const std::vector<int64_t>& shape);
  // Throws std::runtime_error naming the file and dataset when some of its chunks were never written (a truncated
  // or damaged file): they would read as zeros and train without a word.
  static void check_fully_written(int64_t dataset_id, const std::string& path, const std::string& name);
  // Gives each file its sample count (after the caller checked its shapes).
  void set_counts(const std::vector<int64_t>& counts);
  int64_t num_samples() const { return total_; }
  // The first file's path (and "and others"), for messages.
  std::string describe() const;
  // Each file's [first sample, count).
  std::vector<std::pair<int64_t, int64_t>> ranges() const;
  // Where sample i is: its file and its row there.
  std::pair<size_t, int64_t> locate(int64_t i) const;
  // Sample i's slab of dataset d (every dimension after the first), as int32.
  void read(int64_t i, size_t d, int32_t* out) const;

 private:
  struct File {
    std::string path;
    int64_t file_id = -1;
    std::vector<int64_t> dataset_ids;
    std::vector<std::vector<int64_t>> shapes;  // read once when opened
    int64_t first = 0, count = 0;
  };
  std::vector<File> files_;
  int64_t total_ = 0;
};

}  // namespace zoo::data
