// Implementation of data/create_hdf5_io.h with the HDF5 C API and zlib.
#include "data/create_hdf5_io.h"

#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <stdexcept>

namespace zoo::data {
namespace fs = std::filesystem;

namespace {

// Writes k samples (k * R * msl int32, row-major) as modelzoo does: dataset
// "data" (k, R, msl), gzip, chunks (1, R, msl), file attribute n_examples.
void write_samples_file(const std::string& path, const std::vector<int32_t>& rows, int64_t R, int64_t msl) {
  const hsize_t k = rows.size() / (R * msl);
  const std::string tmp = path + ".tmp";
  hid_t file = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) throw std::runtime_error(tmp + ": cannot create the HDF5 file");
  const hsize_t dims[3] = {k, static_cast<hsize_t>(R), static_cast<hsize_t>(msl)},
                chunk[3] = {1, static_cast<hsize_t>(R), static_cast<hsize_t>(msl)};
  hid_t space = H5Screate_simple(3, dims, nullptr);
  hid_t props = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(props, 3, chunk);
  H5Pset_deflate(props, 4);  // h5py's compression="gzip" default level
  hid_t data = H5Dcreate2(file, "data", H5T_STD_I32LE, space, H5P_DEFAULT, props, H5P_DEFAULT);
  herr_t status = data < 0 ? -1 : H5Dwrite(data, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data());
  hid_t attr_space = H5Screate(H5S_SCALAR);
  hid_t attr = data < 0 ? -1 : H5Acreate2(file, "n_examples", H5T_STD_I64LE, attr_space, H5P_DEFAULT, H5P_DEFAULT);
  const int64_t n = static_cast<int64_t>(k);
  if (attr < 0 || H5Awrite(attr, H5T_NATIVE_INT64, &n) < 0) status = -1;
  if (attr >= 0) H5Aclose(attr);
  H5Sclose(attr_space);
  if (data >= 0) H5Dclose(data);
  H5Pclose(props);
  H5Sclose(space);
  if (H5Fclose(file) < 0) status = -1;
  if (status < 0) {
    fs::remove(tmp);
    throw std::runtime_error(path + ": writing the HDF5 file failed (disk full?)");
  }
  fs::rename(tmp, path);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

int32_t* SampleWriter::new_sample() {
  const int64_t msl = o_.max_seq_length;
  const size_t at = rows_.size();
  rows_.resize(at + rows_per_sample() * msl, pad_);
  std::fill(rows_.begin() + at + msl, rows_.begin() + at + 2 * msl, 0);  // loss mask
  if (o_.pack) std::fill(rows_.begin() + at + 3 * msl, rows_.end(), 0);  // attention_span, position_ids
  return rows_.data() + at;
}

void SampleWriter::sample_added() {
  if (static_cast<int64_t>(rows_.size()) == rows_per_sample() * o_.max_seq_length * o_.files_per_record) flush();
}

void SampleWriter::add(const int32_t* tokens, int64_t length, const uint8_t* in_loss) {
  if (o_.pack) return add_packed({{tokens, length, in_loss}});
  const int64_t msl = o_.max_seq_length, n = length - 1;
  int32_t* ids = new_sample();
  int32_t* mask = ids + msl;
  int32_t* labels = mask + msl;
  std::copy(tokens, tokens + n, ids);
  for (int64_t j = 0; j < n; ++j) mask[j] = in_loss ? in_loss[j + 1] != 0 : 1;
  loss_tokens_ += std::count(mask, mask + n, 1);
  std::copy(tokens + 1, tokens + length, labels);
  sample_added();
}

void SampleWriter::add_packed(const std::vector<Sequence>& sequences) {
  const int64_t msl = o_.max_seq_length;
  int32_t* ids = new_sample();
  int32_t *mask = ids + msl, *labels = ids + 2 * msl, *span = ids + 3 * msl, *positions = ids + 4 * msl;
  int64_t at = 0;
  for (const Sequence& s : sequences) {
    const int64_t n = s.length - 1;
    if (n < 1 || at + n > msl) throw std::logic_error("add_packed: the sequences do not fit one row");
    for (int64_t j = 0; j < n; ++j) {
      ids[at + j] = s.tokens[j];
      labels[at + j] = s.tokens[j + 1];
      mask[at + j] = s.in_loss ? s.in_loss[j + 1] != 0 : 1;
      span[at + j] = static_cast<int32_t>(n - 1 - j);
      positions[at + j] = static_cast<int32_t>(j);
    }
    loss_tokens_ += std::count(mask + at, mask + at + n, 1);
    at += n;
  }
  sample_added();
}

void SampleWriter::flush() {
  if (rows_.empty()) return;
  const auto path = fs::path(o_.output_dir) / (o_.output_name + "_" + std::to_string(files_) + ".h5");
  write_samples_file(path.string(), rows_, rows_per_sample(), o_.max_seq_length);
  written_.push_back(path.string());
  samples_ += static_cast<int64_t>(rows_.size()) / (rows_per_sample() * o_.max_seq_length);
  ++files_;
  rows_.clear();
}

int64_t SampleWriter::samples() const {
  return samples_ + static_cast<int64_t>(rows_.size()) / (rows_per_sample() * o_.max_seq_length);
}

void SampleWriter::remove_written() {
  for (const auto& p : written_) fs::remove(p);
}

LineReader::LineReader(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
  if (!file_) throw std::runtime_error(path + ": cannot read");
  gzbuffer(file_, 1 << 20);
  // zlib passes non-gzip bytes through as they are: a .gz that is not
  // gzip (a renamed or half-written file) would be read as plain text.
  if (ends_with(path, ".gz") && gzdirect(file_) == 1) {
    gzclose(file_);
    throw std::runtime_error(path +
                             ": not gzip data (it does not start with gzip's header); is the file damaged "
                             "or misnamed?");
  }
}

LineReader::~LineReader() { gzclose(file_); }

bool LineReader::next(std::string& line) {
  line.clear();
  char buf[1 << 16];
  while (gzgets(file_, buf, sizeof buf)) {
    line += buf;
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      return true;
    }
  }
  check_error();
  return !line.empty();
}

std::string LineReader::rest() {
  std::string text;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(file_, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  check_error();
  return text;
}

// zlib reports a gzip stream cut short (Z_BUF_ERROR, "unexpected end of
// file") or a bad checksum only through gzerror, after a read that returned
// what it had: a truncated download must not become a short data set.
void LineReader::check_error() {
  int error = Z_OK;
  const char* message = gzerror(file_, &error);
  if (error == Z_BUF_ERROR)
    throw std::runtime_error(path_ + ": the gzip data ends early (" + message + "); the file is truncated");
  if (error != Z_OK && error != Z_STREAM_END) throw std::runtime_error(path_ + ": " + message);
}

bool is_text_file(const std::string& p) { return ends_with(p, ".txt") || ends_with(p, ".txt.gz"); }
bool is_jsonl_file(const std::string& p) { return ends_with(p, ".jsonl") || ends_with(p, ".jsonl.gz"); }

std::vector<std::string> input_files(const std::string& input_dir, bool text_too, std::ostream& progress) {
  if (!fs::is_directory(input_dir)) throw std::invalid_argument("--input_dir " + input_dir + ": not a directory");
  const char* wanted = text_too ? ".txt or .jsonl" : ".jsonl";
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(input_dir)) {
    const std::string p = e.path().string();
    if (!e.is_regular_file()) {
      // An input by its name that cannot be read as one is an error, not a file quietly left out.
      if (!(text_too && is_text_file(p)) && !is_jsonl_file(p)) continue;
      const char* what = e.is_directory()                          ? "a directory"
                         : e.is_symlink() && !fs::exists(e.path()) ? "a symbolic link to nothing"
                         : e.is_fifo()                             ? "a FIFO"
                                                                   : "not a regular file";
      throw std::invalid_argument("--input_dir " + input_dir + ": " + p + " is " + what + ", expected a " + wanted +
                                  " file");
    }
    if ((text_too && is_text_file(p)) || is_jsonl_file(p)) files.push_back(p);
    else progress << "create-hdf5: skipping " << p << " (not " << wanted << ", gzipped or not)\n";
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::invalid_argument("--input_dir " + input_dir + ": no " + wanted + " files");
  return files;
}

void for_each_json_line(const std::string& path,
                        const std::function<void(const nlohmann::json&, const std::string& where)>& line) {
  LineReader in(path);
  std::string text;
  for (int64_t n = 1; in.next(text); ++n) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument(where + ": not a JSON object (" + e.what() + ")");
    }
    if (!j.is_object()) throw std::invalid_argument(where + ": expected a JSON object, got " + j.type_name());
    line(j, where);
  }
}

void show_progress(std::ostream& out, size_t done, size_t total, const SampleWriter& w, int64_t tokens,
                   double seconds) {
  const int width = 30, filled = static_cast<int>(width * done / std::max<size_t>(total, 1));
  out << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << done << "/" << total
      << " files, " << w.samples() << " samples, " << tokens << " tokens, " << std::fixed << std::setprecision(0)
      << (seconds > 0 ? tokens / seconds : 0.0) << " tokens/s" << std::flush;
}

void write_samples(const std::vector<std::string>& files, SampleWriter& writer, CreateHdf5Summary& s,
                   std::ostream& progress, const std::function<void(const std::string& file)>& read,
                   const std::function<void()>& finish) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    for (size_t f = 0; f < files.size(); ++f) {
      read(files[f]);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      show_progress(progress, f + 1, files.size(), writer, s.tokens, seconds);
    }
    if (finish) finish();
    writer.flush();
  } catch (...) {
    progress << "\n";
    writer.remove_written();
    throw;
  }
  progress << "\n";
  s.samples = writer.samples();
  s.files = writer.files();
  s.loss_tokens = writer.loss_tokens();
}

void refuse_existing_dataset(const CreateHdf5Options& o) {
  fs::create_directories(o.output_dir);
  for (const auto& e : fs::directory_iterator(o.output_dir)) {
    const std::string name = e.path().filename().string();
    if (name == "data_params.json" || (name.rfind(o.output_name + "_", 0) == 0 && e.path().extension() == ".h5"))
      throw std::invalid_argument("--output_dir " + o.output_dir + " already holds " + name +
                                  "; choose an empty directory (zoo never overwrites a dataset)");
  }
}

void write_data_params(const CreateHdf5Options& o, const nlohmann::json& params) {
  const auto json_path = fs::path(o.output_dir) / "data_params.json";
  std::ofstream(json_path.string() + ".tmp") << params.dump(2) << "\n";
  fs::rename(json_path.string() + ".tmp", json_path);
}

}  // namespace zoo::data
