// Implementation of data/processors/gpt_hdf5.h with the HDF5 C API.
#include "data/processors/gpt_hdf5.h"

#include <hdf5.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include "data/hdf5_files.h"
#include "data/iterable_loader.h"

namespace zoo::data {
namespace {

// How a sample-format dataset stores its samples: as modelzoo writes them
// (int32 LE, one sample per chunk, gzip or no filter) zoo can read the
// stored chunks itself; `deflated` says whether they are gzipped.
struct ChunkLayout {
  bool one_sample_per_chunk = false;
  bool deflated = false;
};
ChunkLayout chunk_layout(hid_t dataset, const std::vector<hsize_t>& dims) {
  ChunkLayout layout;
  hid_t type = H5Dget_type(dataset);
  const bool int32_le = H5Tequal(type, H5T_STD_I32LE) > 0;
  H5Tclose(type);
  hid_t plist = H5Dget_create_plist(dataset);
  hsize_t chunk[3] = {0, 0, 0};
  const bool one_sample_chunks = H5Pget_layout(plist) == H5D_CHUNKED && H5Pget_chunk(plist, 3, chunk) == 3 &&
                                 chunk[0] == 1 && chunk[1] == dims[1] && chunk[2] == dims[2];
  const int filters = H5Pget_nfilters(plist);
  bool deflate_only = filters == 0;
  if (filters == 1) {
    unsigned flags = 0;
    size_t nvalues = 0;
    deflate_only = H5Pget_filter2(plist, 0, &flags, &nvalues, nullptr, 0, nullptr, nullptr) == H5Z_FILTER_DEFLATE;
  }
  H5Pclose(plist);
  layout.one_sample_per_chunk = int32_le && one_sample_chunks && deflate_only;
  layout.deflated = filters == 1;
  return layout;
}

// What HDF5's error stack says went wrong in the last failed call, e.g.
// "required filter 'lzf' is not registered", for messages ("" when nothing).
std::string hdf5_error_text() {
  std::vector<std::string> lines;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* e, void* out) -> herr_t {
        auto& v = *static_cast<std::vector<std::string>*>(out);
        if (e->desc && *e->desc && v.size() < 3) v.emplace_back(e->desc);
        return 0;
      },
      &lines);
  std::string text;
  for (const auto& l : lines) text += (text.empty() ? "" : "; ") + l;
  return text.empty() ? text : " (HDF5: " + text + ")";
}

// A filter of the dataset that this HDF5 library cannot decode (a plugin
// such as lzf or blosc that is not installed), named, or "".
std::string missing_filter(hid_t dataset) {
  hid_t plist = H5Dget_create_plist(dataset);
  std::string missing;
  const int filters = H5Pget_nfilters(plist);
  for (int k = 0; k < filters && missing.empty(); ++k) {
    unsigned flags = 0;
    size_t nvalues = 0;
    char name[64] = {0};
    const H5Z_filter_t id =
        H5Pget_filter2(plist, static_cast<unsigned>(k), &flags, &nvalues, nullptr, sizeof name, name, nullptr);
    if (id >= 0 && H5Zfilter_avail(id) <= 0)
      missing = std::string(*name ? name : "unnamed") + " (HDF5 filter id " + std::to_string(id) + ")";
  }
  H5Pclose(plist);
  return missing;
}

}  // namespace

const config::Schema<GptHdf5Options>& GptHdf5Options::schema() {
  using O = GptHdf5Options;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (GptHDF5DataProcessor, GptHDF5MapDataProcessor)",
                         "modelzoo HDF5 LM samples (*.h5, dataset 'data', int32 (n, 3, msl)).");
    add_loader_fields(sc)
        .field("max_sequence_length", &O::max_sequence_length,
               "Tokens per sample: checked against sample-format files (null: taken from them); required to cut "
               "corpus-format files (rank-1 token streams) into samples.",
               config::if_set(config::positive<int64_t>()))
        .field("shuffle_buffer", &O::shuffle_buffer,
               "Samples in the shuffle buffer (GptHDF5DataProcessor; null: 10 * batch_size).",
               config::if_set(config::positive<int64_t>()))
        .field("use_worker_cache", &O::use_worker_cache, "Copy data to worker-local storage (Cerebras clusters).")
        .field("data_transforms", &O::data_transforms,
               "GptHDF5MapDataProcessor: transforms of each batch, in order (add_sink_tokens: see --help-config).")
        .ignored({"num_examples"}, "modelzoo's HDF5 processors do not read it; the files decide the samples")
        .ignored({"vocab_size"},
                 "deprecated and unused in modelzoo's HDF5 processors; the model's vocab_size "
                 "is checked against the token ids read")
        .ignored({"repeat"},
                 "deprecated and unused in modelzoo's HDF5 processors; epochs follow one another "
                 "as num_steps asks")
        .field("mixture", &O::mixture,
               "GptHDF5MapDataProcessor, instead of data_dir: items {data_dir, weight}; each data set takes its "
               "weight's share of the samples, an epoch seeing every sample of each set weighing > 5% once.")
        .field("use_vsl", &O::use_vsl,
               "Samples are (n, 5, msl) rows packing several sequences (modelzoo's variable sequence length, "
               "written by `zoo data create-hdf5 ... --pack true`): each sequence attends only within itself and "
               "numbers its positions from 0. The files must all be so, or none.")
        .field("data_subset", &O::data_subset,
               "GptHDF5MapDataProcessor: only these ranges of data_dir's samples, e.g. \"0.0-0.5\" or "
               "\"0.1-0.3,0.7-1.0\" (a mixture's items take their own).")
        .validate([](const O& o, const auto& fail) {
          if (o.data_subset && o.data_processor != "GptHDF5MapDataProcessor")
            fail("data_subset", "applies to GptHDF5MapDataProcessor only (as in modelzoo)");
          if (o.data_subset && !o.mixture.empty())
            fail("data_subset", "with a mixture, give each item its own data_subset");
          try {
            if (o.data_subset) parse_data_subset(*o.data_subset);
          } catch (const std::invalid_argument& e) {
            fail("data_subset", e.what());
          }
          if (!o.data_transforms.empty() && o.use_vsl)
            fail("data_transforms",
                 "not with use_vsl: the transforms insert tokens the packed rows do not account for");
          if (!o.data_transforms.empty() && o.data_processor != "GptHDF5MapDataProcessor")
            fail("data_transforms", "applies to GptHDF5MapDataProcessor only (as in modelzoo)");
          if (!o.mixture.empty() && o.data_processor != "GptHDF5MapDataProcessor")
            fail("mixture", "applies to GptHDF5MapDataProcessor only (as in modelzoo)");
          if (!o.mixture.empty() && !o.data_dir.items.empty()) fail("mixture", "give data_dir or mixture, not both");
        });
    return sc;
  }();
  return s;
}

Hdf5SampleSource::Hdf5SampleSource(const std::vector<std::string>& paths, std::optional<int64_t> msl,
                                   std::optional<int64_t> corpus_window, std::vector<std::string> row_names,
                                   bool packed)
    : row_names_(std::move(row_names)), packed_(packed) {
  if (msl) msl_ = *msl;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors come back as messages below, not stderr dumps
  for (const auto& path : paths) {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) throw std::runtime_error(path + ": not a readable HDF5 file" + hdf5_error_text());
    hid_t d = H5Dopen2(f, "data", H5P_DEFAULT);
    if (d < 0) {
      H5Fclose(f);
      throw std::runtime_error(path + ": no dataset 'data'");
    }
    File file{path, f, d, total_, 0, false};
    files_.push_back(file);  // closed by the destructor from here on
    hid_t space = H5Dget_space(d);
    const int rank = H5Sget_simple_extent_ndims(space);
    std::vector<hsize_t> dims(std::max(rank, 1), 0);
    if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    H5Sclose(space);
    std::string shape = "(";
    for (int k = 0; k < rank; ++k) shape += (k ? ", " : "") + std::to_string(dims[k]);
    shape += rank == 1 ? ",)" : ")";
    hid_t type = H5Dget_type(d);
    const H5T_class_t type_class = H5Tget_class(type);
    H5Tclose(type);
    if (type_class != H5T_INTEGER)
      throw std::runtime_error(
          path + ": dataset 'data' holds " +
          (type_class == H5T_FLOAT ? std::string("floating-point numbers") : std::string("non-integer values")) +
          ", expected int32 token ids");
    Hdf5Files::check_fully_written(d, path, "data");
    if (const std::string filter = missing_filter(d); !filter.empty())
      throw std::runtime_error(path + ": dataset 'data' is compressed with " + filter +
                               ", which this HDF5 library cannot decode; rewrite it with gzip or no compression "
                               "(e.g. h5repack -f GZIP=4 or -f NONE)");
    if (rank == 1 && packed_)
      throw std::runtime_error(path +
                               ": a rank-1 token stream (corpus format) has no packed rows; use_vsl: true "
                               "expects (n, 5, msl) samples");
    if (rank == 1 && row_names_.empty()) {
      const std::optional<int64_t> window = corpus_window ? corpus_window : msl;
      if (!window) throw std::runtime_error(path + ": a rank-1 token stream (corpus format) needs max_sequence_length");
      if (msl_ == 0) msl_ = *window;
      if (*window != msl_)
        throw std::runtime_error(path + ": its token windows of " + std::to_string(*window) +
                                 " differ from sequence length " + std::to_string(msl_) + " in " + files_.front().path);
      files_.back().corpus = true;
      const int64_t windows = dims[0] > 0 ? (static_cast<int64_t>(dims[0]) - 1) / msl_ : 0;
      files_.back().count = windows;
      total_ += windows;
      continue;
    }
    if (!row_names_.empty() && (rank != 3 || dims[1] != row_names_.size())) {
      std::string rows;
      for (const auto& r : row_names_) rows += (rows.empty() ? "" : ", ") + r;
      throw std::runtime_error(path + ": dataset 'data' has shape " + shape + ", expected (n, " +
                               std::to_string(row_names_.size()) + ", msl) samples (rows " + rows + ")");
    }
    if (row_names_.empty() && (rank != 3 || (dims[1] != 3 && dims[1] != 5)))
      throw std::runtime_error(
          path + ": dataset 'data' has shape " + shape +
          ", expected (n, 3, msl) samples (rows input_ids, attention_mask, labels), (n, 5, msl) "
          "with modelzoo's two variable-length-sequence rows after them, or a rank-1 token stream");
    if (row_names_.empty() && packed_ && dims[1] != 5)
      throw std::runtime_error(path + ": dataset 'data' has shape " + shape +
                               ", but use_vsl: true expects (n, 5, msl) samples whose rows 4 and 5 "
                               "(attention_span, position_ids) say where each packed sequence lies");
    if (row_names_.empty() && !packed_ && dims[1] == 5)
      throw std::runtime_error(path + ": dataset 'data' has shape " + shape +
                               ": (n, 5, msl) rows pack several sequences (modelzoo's variable sequence length); "
                               "set use_vsl: true so that each attends only within itself");
    if (msl_ == 0) msl_ = static_cast<int64_t>(dims[2]);
    if (static_cast<int64_t>(dims[2]) != msl_)
      throw std::runtime_error(
          path + ": sequence length " + std::to_string(dims[2]) + " differs from " +
          (msl ? "max_sequence_length " + std::to_string(msl_) : std::to_string(msl_) + " in " + files_.front().path));
    files_.back().count = static_cast<int64_t>(dims[0]);
    files_.back().rows = static_cast<int64_t>(dims[1]);
    total_ += static_cast<int64_t>(dims[0]);
    const ChunkLayout layout = chunk_layout(d, dims);
    files_.back().direct_chunks = layout.one_sample_per_chunk;
    files_.back().deflated = layout.deflated;
  }
}

bool Hdf5SampleSource::read_chunk(const File& f, int64_t row, int32_t* out) const {
  const hsize_t offset[3] = {static_cast<hsize_t>(row), 0, 0};
  hsize_t stored = 0;
  if (H5Dget_chunk_storage_size(f.dataset_id, offset, &stored) < 0 || stored == 0) return false;
  const uLongf want = static_cast<uLongf>(f.rows * msl_ * sizeof(int32_t));
  if (stored > want + want / 8 + 1024) return false;  // a corrupt chunk index; H5Dread says what is wrong
  thread_local std::vector<unsigned char> packed;
  packed.resize(stored);
  uint32_t skipped_filters = 0;
  if (H5Dread_chunk(f.dataset_id, H5P_DEFAULT, offset, &skipped_filters, packed.data()) < 0) return false;
  if (!f.deflated || (skipped_filters & 1u)) {
    if (stored != want) return false;
    std::memcpy(out, packed.data(), want);
    return true;
  }
  uLongf got = want;
  return uncompress(reinterpret_cast<Bytef*>(out), &got, packed.data(), static_cast<uLong>(stored)) == Z_OK &&
         got == want;
}

Hdf5SampleSource::~Hdf5SampleSource() {
  for (auto& f : files_) {
    H5Dclose(f.dataset_id);
    H5Fclose(f.file_id);
  }
}

std::string Hdf5SampleSource::describe() const {
  return files_.empty() ? "HDF5 data" : files_.front().path + (files_.size() > 1 ? " and others" : "");
}

const Hdf5SampleSource::File& Hdf5SampleSource::file_of(int64_t i) const {
  if (i < 0 || i >= total_) throw std::out_of_range("HDF5 sample index " + std::to_string(i) + " out of range");
  // The last file starting at or before i (empty files share a start; skip past them).
  auto it = std::upper_bound(files_.begin(), files_.end(), i, [](int64_t x, const File& f) { return x < f.first; });
  return *std::prev(it);
}

std::string Hdf5SampleSource::locate(int64_t i) const {
  const File& f = file_of(i);
  return f.path + (f.corpus ? ", window " : ", sample ") + std::to_string(i - f.first);
}

std::vector<std::pair<int64_t, int64_t>> Hdf5SampleSource::file_ranges() const {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& f : files_) ranges.emplace_back(f.first, f.count);
  return ranges;
}

void Hdf5SampleSource::read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const {
  read_rows(i, {0, 1, 2}, input_ids, mask, labels);
}

void Hdf5SampleSource::read_packing(int64_t i, int32_t* attention_span, int32_t* position_ids) const {
  thread_local std::vector<int32_t> unused(static_cast<size_t>(msl_));
  unused.resize(static_cast<size_t>(msl_));
  read_rows(i, {3, 4, 4}, attention_span, position_ids, unused.data());
}

void Hdf5SampleSource::read_rows(int64_t i, const std::array<int64_t, 3>& rows, int32_t* input_ids, int32_t* mask,
                                 int32_t* labels) const {
  const File* file = &file_of(i);
  if (file->corpus) {
    thread_local std::vector<int32_t> window;
    window.resize(static_cast<size_t>(msl_ + 1));
    hsize_t start[1] = {static_cast<hsize_t>((i - file->first) * msl_)}, count[1] = {static_cast<hsize_t>(msl_ + 1)};
    hid_t space = H5Dget_space(file->dataset_id);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    hid_t mem = H5Screate_simple(1, count, nullptr);
    herr_t status = H5Dread(file->dataset_id, H5T_NATIVE_INT32, mem, space, H5P_DEFAULT, window.data());
    H5Sclose(mem);
    H5Sclose(space);
    if (status < 0)
      throw std::runtime_error(file->path + ": cannot read tokens at window " + std::to_string(i - file->first) +
                               hdf5_error_text());
    std::copy(window.begin(), window.end() - 1, input_ids);
    std::copy(window.begin() + 1, window.end(), labels);
    std::fill(mask, mask + msl_, 1);
    return;
  }
  thread_local std::vector<int32_t> row;
  row.resize(static_cast<size_t>(file->rows * msl_));
  auto copy_out = [&](const int32_t* sample, const std::array<int64_t, 3>& at) {
    std::copy(sample + at[0] * msl_, sample + (at[0] + 1) * msl_, input_ids);
    std::copy(sample + at[1] * msl_, sample + (at[1] + 1) * msl_, mask);
    std::copy(sample + at[2] * msl_, sample + (at[2] + 1) * msl_, labels);
  };
  if (file->direct_chunks && read_chunk(*file, i - file->first, row.data())) return copy_out(row.data(), rows);
  // Through HDF5: the rows from the first wanted to the last wanted.
  const int64_t first_row = *std::min_element(rows.begin(), rows.end());
  const int64_t last_row = *std::max_element(rows.begin(), rows.end());
  hsize_t start[3] = {static_cast<hsize_t>(i - file->first), static_cast<hsize_t>(first_row), 0};
  hsize_t count[3] = {1, static_cast<hsize_t>(last_row - first_row + 1), static_cast<hsize_t>(msl_)};
  hid_t space = H5Dget_space(file->dataset_id);
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t mem = H5Screate_simple(3, count, nullptr);  // the file selection's shape: HDF5's fast path
  herr_t status = H5Dread(file->dataset_id, H5T_NATIVE_INT32, mem, space, H5P_DEFAULT, row.data());
  H5Sclose(mem);
  H5Sclose(space);
  if (status < 0)
    throw std::runtime_error(file->path + ": cannot read sample " + std::to_string(i - file->first) +
                             hdf5_error_text());
  copy_out(row.data(), {rows[0] - first_row, rows[1] - first_row, rows[2] - first_row});
}

std::vector<std::string> sorted_hdf5_files(const config::PathList& data_dir, const config::Origin& at) {
  if (data_dir.items.empty()) at.fail("data_dir", "required: directory (or list) of *.h5 files");
  std::vector<std::string> files;
  for (const auto& dir : data_dir.items)
    for (const auto& f : list_files(require_directory(dir, at), ".h5")) files.push_back(f);
  std::sort(files.begin(), files.end());
  if (files.empty()) at.fail("data_dir", "no *.h5 files in the given director(y/ies)");
  return files;
}

std::vector<std::string> task_hdf5_files(const config::PathList& data_dir, const TaskShard& shard,
                                         const config::Origin& at) {
  const std::vector<std::string> all = sorted_hdf5_files(data_dir, at);
  std::vector<std::string> mine;  // files[rank::num_tasks], as modelzoo shards them
  for (size_t i = static_cast<size_t>(shard.rank); i < all.size(); i += static_cast<size_t>(shard.num_tasks))
    mine.push_back(all[i]);
  if (mine.empty())
    at.fail("data_dir", std::to_string(all.size()) + " *.h5 file(s) for " + std::to_string(shard.num_tasks) +
                            " data-parallel tasks (WORLD_SIZE): task " + std::to_string(shard.rank) +
                            " gets none; this processor shards whole files, so it needs at least one file per task");
  return mine;
}

std::unique_ptr<DataLoader> open_map_hdf5(const LoaderOptions& o, const config::Origin& at,
                                          const std::function<std::shared_ptr<SampleSource>()>& open) {
  std::shared_ptr<SampleSource> source;
  try {
    source = open();
  } catch (const config::ConfigError&) {
    throw;  // already names the file and key
  } catch (const std::runtime_error& e) {
    at.fail("data_dir", e.what());
  }
  if (source->num_samples() < o.batch_size)
    at.fail("data_dir", source->describe() + ": " + std::to_string(source->num_samples()) +
                            " sample(s), fewer than batch_size " + std::to_string(o.batch_size));
  return std::make_unique<MapStyleLoader>(source, o);
}

std::unique_ptr<DataLoader> open_task_hdf5(const LoaderOptions& o, std::optional<int64_t> shuffle_buffer,
                                           const config::Origin& at, const std::string& samples,
                                           const std::function<OpenedHdf5(const std::vector<std::string>&)>& open) {
  const TaskShard shard = TaskShard::from_environment();
  OpenedHdf5 opened;
  try {
    opened = open(task_hdf5_files(o.data_dir, shard, at));
  } catch (const config::ConfigError&) {
    throw;  // already names the file and key
  } catch (const std::runtime_error& e) {
    at.fail("data_dir", e.what());
  }
  const int64_t n = opened.source->num_samples();
  if (n < o.batch_size)
    at.fail("data_dir", opened.source->describe() + ": " + std::to_string(n) + " " + samples +
                            ", fewer than batch_size " + std::to_string(o.batch_size));
  return std::make_unique<IterableLoader>(opened.source, opened.file_ranges, o,
                                          shuffle_buffer.value_or(10 * o.batch_size), shard);
}

namespace {

std::shared_ptr<Hdf5SampleSource> open_source(const std::vector<std::string>& files, const GptHdf5Options& o,
                                              const config::Origin& at) {
  std::shared_ptr<Hdf5SampleSource> source;
  try {
    source = std::make_shared<Hdf5SampleSource>(files, o.max_sequence_length, std::nullopt, std::vector<std::string>{},
                                                o.use_vsl);
  } catch (const std::exception& e) {
    at.fail("data_dir", e.what());
  }
  if (source->num_samples() < o.batch_size)
    at.fail("data_dir", source->describe() + ": " + std::to_string(source->num_samples()) +
                            " sample(s), fewer than batch_size " + std::to_string(o.batch_size));
  return source;
}

// `source`, or its samples in `ranges` (a data_subset) when given.
std::shared_ptr<LmSampleSource> subset(std::shared_ptr<LmSampleSource> source, const std::optional<std::string>& ranges,
                                       const std::string& key, const config::Origin& at) {
  if (!ranges) return source;
  auto part = std::make_shared<SubsetSource>(source, parse_data_subset(*ranges));
  if (part->num_samples() == 0)
    at.fail(key, "\"" + *ranges + "\" keeps none of the " + std::to_string(source->num_samples()) + " samples of " +
                     source->describe());
  return part;
}

// modelzoo interleaves the mixture's data sets when it does not shuffle.
std::shared_ptr<LmSampleSource> open_mixture(const GptHdf5Options& o, const config::Origin& at) {
  std::vector<std::shared_ptr<LmSampleSource>> sources;
  std::vector<double> weights;
  GptHdf5Options each = o;
  each.batch_size = 1;  // a small set may be smaller than a batch: the mixture repeats it
  for (const MixtureEntry& m : o.mixture) {
    sources.push_back(subset(open_source(sorted_hdf5_files(m.data_dir, at), each, at), m.data_subset, "mixture", at));
    weights.push_back(m.weight);
  }
  try {
    return std::make_shared<MixtureSource>(sources, weights, !o.shuffle, static_cast<uint64_t>(o.shuffle_seed));
  } catch (const std::invalid_argument& e) {
    at.fail("mixture", e.what());
  }
}

std::unique_ptr<DataLoader> open_map(const GptHdf5Options& o, const config::Origin& at) {
  std::shared_ptr<LmSampleSource> source =
      o.mixture.empty()
          ? subset(open_source(sorted_hdf5_files(o.data_dir, at), o, at), o.data_subset, "data_subset", at)
          : open_mixture(o, at);
  if (source->num_samples() < o.batch_size)
    at.fail(o.mixture.empty() ? "data_dir" : "mixture",
            source->describe() + ": " + std::to_string(source->num_samples()) + " sample(s), fewer than batch_size " +
                std::to_string(o.batch_size));
  return with_transforms(std::make_unique<MapStyleLoader>(source, o), o.data_transforms);
}

std::unique_ptr<DataLoader> open_iterable(const GptHdf5Options& o, const config::Origin& at) {
  const TaskShard shard = TaskShard::from_environment();
  auto source = open_source(task_hdf5_files(o.data_dir, shard, at), o, at);
  return std::make_unique<IterableLoader>(source, source->file_ranges(), o,
                                          o.shuffle_buffer.value_or(10 * o.batch_size), shard);
}

// LM batches' features, with the packed rows' two when `packed`.
std::vector<std::string> lm_features(bool packed) {
  std::vector<std::string> f = {"input_ids", "attention_mask", "labels"};
  if (packed) f.insert(f.end(), models::kPackedSequenceFeatures.begin(), models::kPackedSequenceFeatures.end());
  return f;
}

}  // namespace

DataProcessor gpt_hdf5_processor() {
  return make_data_processor<GptHdf5Options>(
      "GptHDF5DataProcessor",
      "modelzoo HDF5 LM samples, iterable: each data-parallel task (RANK of WORLD_SIZE) reads the files "
      "sorted[rank::WORLD_SIZE] in turn; shuffling permutes the files each epoch and mixes samples through a "
      "shuffle_buffer.",
      lm_features(true), open_iterable, [](const GptHdf5Options& o) { return lm_features(o.use_vsl); });
}

DataProcessor gpt_hdf5_map_processor() {
  return make_data_processor<GptHdf5Options>(
      "GptHDF5MapDataProcessor",
      "modelzoo HDF5 LM data, map-style: sample or corpus format; shuffling permutes all samples each epoch.",
      lm_features(true), open_map, [](const GptHdf5Options& o) { return lm_features(o.use_vsl); });
}

}  // namespace zoo::data
