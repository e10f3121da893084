// Implementation of data/create_hdf5.h with the HDF5 C API.
#include "data/create_hdf5.h"

#include <hdf5.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace zoo::data {
namespace fs = std::filesystem;

namespace {

// Writes k samples (k * 3 * msl int32, row-major) as modelzoo does: dataset
// "data" (k, 3, msl), gzip, chunks (1, 3, msl), file attribute n_examples.
void write_samples_file(const std::string& path, const std::vector<int32_t>& rows, int64_t msl) {
  const hsize_t k = rows.size() / (3 * msl);
  const std::string tmp = path + ".tmp";
  hid_t file = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) throw std::runtime_error(tmp + ": cannot create the HDF5 file");
  const hsize_t dims[3] = {k, 3, static_cast<hsize_t>(msl)}, chunk[3] = {1, 3, static_cast<hsize_t>(msl)};
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

// Collects samples and writes a file every files_per_record of them.
class SampleWriter {
 public:
  SampleWriter(const CreateHdf5Options& o, int32_t pad_id) : o_(o), pad_(pad_id) {}

  // One chunk of 2 .. msl + 1 tokens becomes one sample.
  void add(const int32_t* tokens, int64_t length) {
    const int64_t msl = o_.max_seq_length, n = length - 1;
    const size_t at = rows_.size();
    rows_.resize(at + 3 * msl, pad_);
    int32_t* ids = rows_.data() + at;
    int32_t* mask = ids + msl;
    int32_t* labels = mask + msl;
    std::copy(tokens, tokens + n, ids);
    std::fill(mask, mask + msl, 0);
    std::fill(mask, mask + n, 1);
    std::copy(tokens + 1, tokens + length, labels);
    if (static_cast<int64_t>(rows_.size()) == 3 * msl * o_.files_per_record) flush();
  }

  void flush() {
    if (rows_.empty()) return;
    const auto path = fs::path(o_.output_dir) / (o_.output_name + "_" + std::to_string(files_) + ".h5");
    write_samples_file(path.string(), rows_, o_.max_seq_length);
    written_.push_back(path.string());
    samples_ += static_cast<int64_t>(rows_.size()) / (3 * o_.max_seq_length);
    ++files_;
    rows_.clear();
  }

  int64_t samples() const { return samples_ + static_cast<int64_t>(rows_.size()) / (3 * o_.max_seq_length); }
  int64_t files() const { return files_; }
  // After a failure: the run's files go, so a corrected re-run finds the directory as it was.
  void remove_written() {
    for (const auto& p : written_) fs::remove(p);
  }

 private:
  const CreateHdf5Options& o_;
  int32_t pad_;
  std::vector<int32_t> rows_;
  std::vector<std::string> written_;
  int64_t samples_ = 0, files_ = 0;
};

// Cuts token streams into chunks of msl + 1: one stream for all documents
// when packing, one per document otherwise.
class Chunker {
 public:
  Chunker(SampleWriter& writer, int64_t msl, bool pack) : writer_(writer), window_(msl + 1), pack_(pack) {}

  void add_document(const std::vector<int32_t>& tokens) {
    pending_.insert(pending_.end(), tokens.begin(), tokens.end());
    while (static_cast<int64_t>(pending_.size() - start_) >= window_) {
      writer_.add(pending_.data() + start_, window_);
      start_ += window_;
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(start_));
    start_ = 0;
    if (!pack_) finish();
  }

  // The leftover becomes a padded sample; a lone token cannot (it has no label).
  void finish() {
    if (pending_.size() >= 2) writer_.add(pending_.data(), static_cast<int64_t>(pending_.size()));
    else discarded_ += static_cast<int64_t>(pending_.size());
    pending_.clear();
  }

  int64_t discarded() const { return discarded_; }

 private:
  SampleWriter& writer_;
  int64_t window_;
  bool pack_;
  std::vector<int32_t> pending_;
  size_t start_ = 0;
  int64_t discarded_ = 0;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool is_text(const std::string& p) { return ends_with(p, ".txt") || ends_with(p, ".txt.gz"); }
bool is_jsonl(const std::string& p) { return ends_with(p, ".jsonl") || ends_with(p, ".jsonl.gz"); }

std::vector<std::string> input_files(const CreateHdf5Options& o, std::ostream& progress) {
  if (!fs::is_directory(o.input_dir)) throw std::invalid_argument("--input_dir " + o.input_dir + ": not a directory");
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(o.input_dir)) {
    if (!e.is_regular_file()) continue;
    const std::string p = e.path().string();
    if (is_text(p) || is_jsonl(p)) files.push_back(p);
    else progress << "create-hdf5: skipping " << p << " (not .txt or .jsonl, gzipped or not)\n";
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::invalid_argument("--input_dir " + o.input_dir + ": no .txt or .jsonl files");
  return files;
}

// Lines of a file, gzipped or not (zlib reads plain files as they are).
class LineReader {
 public:
  explicit LineReader(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (!file_) throw std::runtime_error(path + ": cannot read");
    gzbuffer(file_, 1 << 20);
    // zlib passes non-gzip bytes through as they are: a .gz that is not
    // gzip (a renamed or half-written file) would be read as plain text.
    if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0 && gzdirect(file_) == 1) {
      gzclose(file_);
      throw std::runtime_error(path + ": not gzip data (it does not start with gzip's header); is the file damaged "
                               "or misnamed?");
    }
  }
  ~LineReader() { gzclose(file_); }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  // The next line without its '\n'; false at the end.
  bool next(std::string& line) {
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
  // All that is left, byte for byte.
  std::string rest() {
    std::string text;
    char buf[1 << 16];
    int n = 0;
    while ((n = gzread(file_, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    check_error();
    return text;
  }

 private:
  // zlib reports a gzip stream cut short (Z_BUF_ERROR, "unexpected end of
  // file") or a bad checksum only through gzerror, after a read that
  // returned what it had: a truncated download must not become a short
  // data set.
  void check_error() {
    int error = Z_OK;
    const char* message = gzerror(file_, &error);
    if (error == Z_BUF_ERROR)
      throw std::runtime_error(path_ + ": the gzip data ends early (" + message + "); the file is truncated");
    if (error != Z_OK && error != Z_STREAM_END) throw std::runtime_error(path_ + ": " + message);
  }

  std::string path_;
  gzFile file_;
};

// Calls `document` with the text of each document in `path`.
template <class F>
void for_each_document(const std::string& path, const std::string& jsonl_key, F&& document) {
  LineReader in(path);
  if (is_text(path)) {
    document(in.rest());
    return;
  }
  std::string line;
  for (int64_t n = 1; in.next(line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument(path + ":" + std::to_string(n) + ": not a JSON object (" + e.what() + ")");
    }
    if (!j.is_object() || !j.contains(jsonl_key) || !j[jsonl_key].is_string())
      throw std::invalid_argument(path + ":" + std::to_string(n) + ": expected a string under key '" + jsonl_key +
                                  "' (set --jsonl_key)");
    document(j[jsonl_key].get<std::string>());
  }
}

void show_progress(std::ostream& out, size_t done, size_t total, const SampleWriter& w, int64_t tokens, double seconds) {
  const int width = 30, filled = static_cast<int>(width * done / std::max<size_t>(total, 1));
  out << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << done << "/" << total
      << " files, " << w.samples() << " samples, " << tokens << " tokens, " << std::fixed << std::setprecision(0)
      << (seconds > 0 ? tokens / seconds : 0.0) << " tokens/s" << std::flush;
}

}  // namespace

CreateHdf5Summary create_hdf5(const CreateHdf5Options& o, std::ostream& progress) {
  if (o.max_seq_length < 1) throw std::invalid_argument("--max_seq_length must be positive");
  constexpr int64_t kMaxSequenceLength = int64_t{1} << 20;  // past any model's context; the buffers are sized by it
  if (o.max_seq_length > kMaxSequenceLength)
    throw std::invalid_argument("--max_seq_length " + std::to_string(o.max_seq_length) + " is over " +
                                std::to_string(kMaxSequenceLength) + " tokens per sample");
  if (o.files_per_record < 1) throw std::invalid_argument("--files_per_record must be positive");
  auto tokenizer = text::make_tokenizer(o.tokenizer);
  const int64_t vocab = tokenizer->vocab_size();
  int64_t eos = -1;
  if (o.eos_id) eos = *o.eos_id;
  else if (auto id = tokenizer->special_tokens().eos) eos = *id;
  else if (auto id = tokenizer->token_to_id("<|endoftext|>")) eos = *id;
  else throw std::invalid_argument("--eos_id is required: tokenizer " + o.tokenizer.type + " has no eos_token and no <|endoftext|>");
  const int64_t pad = o.pad_id.value_or(eos);
  for (auto [flag, id] : {std::pair<const char*, int64_t>{"--eos_id", eos}, {"--pad_id", pad}})
    if (id < 0 || id >= vocab)
      throw std::invalid_argument(std::string(flag) + " " + std::to_string(id) + " is outside the tokenizer's vocabulary (size " +
                                  std::to_string(vocab) + ")");
  const auto files = input_files(o, progress);
  fs::create_directories(o.output_dir);
  for (const auto& e : fs::directory_iterator(o.output_dir)) {
    const std::string name = e.path().filename().string();
    if (name == "data_params.json" || (name.rfind(o.output_name + "_", 0) == 0 && e.path().extension() == ".h5"))
      throw std::invalid_argument("--output_dir " + o.output_dir + " already holds " + name +
                                  "; choose an empty directory (zoo never overwrites a dataset)");
  }

  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  SampleWriter writer(o, static_cast<int32_t>(pad));
  Chunker chunker(writer, o.max_seq_length, o.pack_sequences);
  CreateHdf5Summary s;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    for (size_t f = 0; f < files.size(); ++f) {
      for_each_document(files[f], o.jsonl_key, [&](const std::string& doc) {
        if (doc.empty()) return;
        std::vector<int32_t> tokens = tokenizer->encode(doc);
        tokens.push_back(static_cast<int32_t>(eos));
        s.tokens += static_cast<int64_t>(tokens.size());
        ++s.documents;
        chunker.add_document(tokens);
      });
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      show_progress(progress, f + 1, files.size(), writer, s.tokens, seconds);
    }
    chunker.finish();
    writer.flush();
  } catch (...) {
    progress << "\n";
    writer.remove_written();
    throw;
  }
  progress << "\n";
  s.samples = writer.samples();
  s.files = writer.files();
  s.discarded_tokens = chunker.discarded();

  nlohmann::json params;
  params["processing"] = {{"input_dir", o.input_dir},
                          {"output_dir", o.output_dir},
                          {"tokenizer_type", o.tokenizer.type},
                          {"vocab_file", o.tokenizer.vocab_file},
                          {"encoder_file", o.tokenizer.encoder_file},
                          {"max_seq_length", o.max_seq_length},
                          {"eos_id", eos},
                          {"pad_id", pad},
                          {"pack_sequences", o.pack_sequences},
                          {"jsonl_key", o.jsonl_key},
                          {"files_per_record", o.files_per_record},
                          {"output_name", o.output_name}};
  params["post-process"] = {{"n_examples", s.samples},  {"n_files", s.files},
                            {"n_documents", s.documents}, {"n_tokens", s.tokens},
                            {"discarded_tokens", s.discarded_tokens}, {"vocab_size", vocab},
                            {"eos_id", eos}, {"pad_id", pad}};
  const auto json_path = fs::path(o.output_dir) / "data_params.json";
  std::ofstream(json_path.string() + ".tmp") << params.dump(2) << "\n";
  fs::rename(json_path.string() + ".tmp", json_path);
  return s;
}

}  // namespace zoo::data
