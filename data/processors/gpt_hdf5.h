// modelzoo's HDF5 LM data: GptHDF5DataProcessor and GptHDF5MapDataProcessor
// over `*.h5` files holding dataset "data", int32 (n, 3, msl) rows
// input_ids / attention_mask (loss mask) / labels, or rank-1 token streams.
// Defines: GptHdf5Options, Hdf5SampleSource, Hdf5RowView, sorted_hdf5_files, task_hdf5_files, open_task_hdf5,
// open_map_hdf5,
// gpt_hdf5_processor,
// gpt_hdf5_map_processor.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/loader.h"
#include "data/mixture.h"
#include "data/registry.h"
#include "data/transforms.h"

namespace zoo::data {

struct GptHdf5Options : LoaderOptions {
  std::optional<int64_t> max_sequence_length;  // checked against the files' msl when set
  std::optional<int64_t> shuffle_buffer;
  bool use_worker_cache = false;
  std::vector<DataTransformSpec> data_transforms;  // map-style only, as modelzoo
  std::vector<MixtureEntry> mixture;               // map-style: instead of data_dir
  std::optional<std::string> data_subset;          // map-style: ranges of data_dir's samples
  bool use_vsl = false;                            // (n, 5, msl) rows packing several sequences
  static const config::Schema<GptHdf5Options>& schema();
};

// All files' samples back to back, in sorted file order. A file is in the
// sample format ((n, 3, msl) rows) or the corpus format (a rank-1 token
// stream, cut into windows of msl + 1 tokens advancing by msl within the
// file; inputs are the first msl, labels the last msl, every position counts).
class Hdf5SampleSource : public LmSampleSource {
 public:
  // `msl` is required for corpus-format files (unless `corpus_window` sets
  // their window length) and, when given, checked against sample-format
  // ones. All files share one sequence length. `row_names`: the rows of a
  // sample, when not LM data's three (DPO's six): files must have exactly
  // these, and no corpus format. `packed`: (n, 5, msl) files whose rows
  // pack several sequences (modelzoo's use_vsl), and only those. Throws
  // std::runtime_error naming the file.
  Hdf5SampleSource(const std::vector<std::string>& files, std::optional<int64_t> msl,
                   std::optional<int64_t> corpus_window = std::nullopt, std::vector<std::string> row_names = {},
                   bool packed = false);
  ~Hdf5SampleSource() override;
  int64_t num_samples() const override { return total_; }
  int64_t sequence_length() const override { return msl_; }
  void read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const override;
  bool packs_sequences() const override { return packed_; }
  void read_packing(int64_t i, int32_t* attention_span, int32_t* position_ids) const override;
  // Rows `rows` (ids, mask, labels) of sample i; read() reads rows 0, 1, 2.
  void read_rows(int64_t i, const std::array<int64_t, 3>& rows, int32_t* input_ids, int32_t* mask,
                 int32_t* labels) const;
  std::string describe() const override;
  std::string locate(int64_t i) const override;
  // Each file's [first sample id, count), in the given file order.
  std::vector<std::pair<int64_t, int64_t>> file_ranges() const;

 private:
  struct File {
    std::string path;
    int64_t file_id, dataset_id, first, count;
    bool corpus;  // rank-1 token stream
    // modelzoo's layout (one sample per chunk, int32 LE, gzip or nothing):
    // read() fetches the stored chunk and inflates it outside HDF5's global
    // lock, so reader threads decompress in parallel.
    bool direct_chunks = false;
    bool deflated = false;
    int64_t rows = 3;  // per sample: 3, or 5 with VSL
  };
  // Sample `row` of f as stored; false when it must go through H5Dread.
  bool read_chunk(const File& f, int64_t row, int32_t* out) const;
  const File& file_of(int64_t i) const;  // the file holding sample i
  std::vector<File> files_;
  std::vector<std::string> row_names_;  // empty: LM data
  int64_t total_ = 0;
  int64_t msl_ = 0;
  bool packed_ = false;
};

// Three of a sample's rows (ids, loss mask, labels) as LM samples, so that
// they are checked as LM data is: one response of DPO's pairs, LLaVA's text.
// `what` names the view in messages ("chosen response").
class Hdf5RowView : public LmSampleSource {
 public:
  Hdf5RowView(std::shared_ptr<Hdf5SampleSource> file, std::array<int64_t, 3> rows, std::string what)
      : file_(std::move(file)), rows_(rows), what_(std::move(what)) {}
  int64_t num_samples() const override { return file_->num_samples(); }
  int64_t sequence_length() const override { return file_->sequence_length(); }
  void read(int64_t i, int32_t* ids, int32_t* mask, int32_t* labels) const override {
    file_->read_rows(i, rows_, ids, mask, labels);
  }
  std::string describe() const override { return file_->describe(); }
  std::string locate(int64_t i) const override { return file_->locate(i) + " (" + what_ + ")"; }

 private:
  std::shared_ptr<Hdf5SampleSource> file_;
  std::array<int64_t, 3> rows_;
  std::string what_;
};

// The *.h5 files of every data_dir entry, sorted; ConfigError when there are none.
std::vector<std::string> sorted_hdf5_files(const config::PathList& data_dir, const config::Origin& at);
// This data-parallel task's share of them, sorted[rank::num_tasks] as
// modelzoo's iterable HDF5 processors shard them; ConfigError when it gets none.
std::vector<std::string> task_hdf5_files(const config::PathList& data_dir, const TaskShard& shard,
                                         const config::Origin& at);

// The stream of modelzoo's iterable HDF5 processors (IterableLoader) over the
// source `open` makes of this task's files, with each file's [first sample,
// count). What `open` throws, and a source with fewer than batch_size
// samples (counted as `samples`, e.g. "preference pair(s)"), is an error at
// data_dir.
struct OpenedHdf5 {
  std::shared_ptr<SampleSource> source;
  std::vector<std::pair<int64_t, int64_t>> file_ranges;
};
std::unique_ptr<DataLoader> open_task_hdf5(const LoaderOptions& o, std::optional<int64_t> shuffle_buffer,
                                           const config::Origin& at, const std::string& samples,
                                           const std::function<OpenedHdf5(const std::vector<std::string>&)>& open);

// A map-style loader over the source `open` makes of sorted files: what it
// throws (a std::runtime_error naming the file) is an error at data_dir, and
// so is a source with fewer samples than batch_size.
std::unique_ptr<DataLoader> open_map_hdf5(const LoaderOptions& o, const config::Origin& at,
                                          const std::function<std::shared_ptr<SampleSource>()>& open);

DataProcessor gpt_hdf5_processor();
DataProcessor gpt_hdf5_map_processor();

}  // namespace zoo::data
