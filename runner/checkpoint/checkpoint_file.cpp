// Implementation of runner/checkpoint/checkpoint.h, part 1: checkpoint files on disk
// (writing, reading, the content checksum). Naming, metadata and state
// dicts are in runner/checkpoint/checkpoint.cpp.
#include <ATen/Parallel.h>
#include <caffe2/serialize/file_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <stdexcept>

#include "runner/checkpoint/checkpoint.h"
#include "runner/checkpoint/crc32c.h"
#include "runner/checkpoint/sharded_checkpoint.h"
#include "runner/checkpoint/torch_pickle.h"
#include "runner/log.h"

namespace zoo::ckpt {

namespace fs = std::filesystem;

namespace {

// The bytes the checksum covers, in the order of a canonical walk of the
// contents (dict keys in sorted order, tensor dtype, shape and bytes,
// scalars, strings): small ones copied, tensor data by reference.
struct ChecksumInput {
  struct Piece {
    const char* data;
    size_t size;
  };
  std::deque<std::string> owned;
  std::vector<torch::Tensor> tensors;  // keeps referenced data alive
  std::vector<Piece> pieces;

  void bytes(const void* p, size_t n) { pieces.push_back({static_cast<const char*>(p), n}); }
  void text(std::string s) {
    owned.push_back(std::move(s));
    bytes(owned.back().data(), owned.back().size());
  }
  template <typename T>
  void value(T x) {
    text(std::string(reinterpret_cast<const char*>(&x), sizeof x));
  }
};

void collect(const c10::IValue& v, ChecksumInput& in) {
  if (v.isGenericDict()) {
    std::vector<std::pair<std::string, c10::IValue>> items;
    for (const auto& kv : v.toGenericDict())
      items.emplace_back(kv.key().isString() ? kv.key().toStringRef()
                         : kv.key().isInt()  ? std::to_string(kv.key().toInt())
                                             : kv.key().tagKind(),
                         kv.value());
    std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [k, value] : items) {
      in.text("k:" + k);
      collect(value, in);
    }
  } else if (v.isList()) {
    for (const auto& item : v.toListRef()) collect(item, in);
  } else if (v.isTensor()) {
    torch::Tensor t = v.toTensor().detach().cpu().contiguous();
    in.text(std::string("t:") + c10::toString(t.scalar_type()));
    in.text(std::string(reinterpret_cast<const char*>(t.sizes().data()), t.dim() * sizeof(int64_t)));
    in.tensors.push_back(t);
    in.bytes(t.data_ptr(), t.nbytes());
  } else if (v.isInt()) {
    in.value(v.toInt());
  } else if (v.isDouble()) {
    in.value(v.toDouble());
  } else if (v.isBool()) {
    in.text(v.toBool() ? "true" : "false");
  } else if (v.isString()) {
    in.text("s:" + v.toStringRef());
  } else {
    in.text(v.tagKind());
  }
}

// CRC32C of everything in `v`, so corruption of any stored value is caught
// (LibTorch's zip reader skips its CRC checks). Large tensors are summed in
// 8 MiB pieces across threads and the pieces combined in order.
uint32_t content_checksum(const c10::IValue& v) {
  ChecksumInput in;
  collect(v, in);
  constexpr size_t kChunk = size_t{8} << 20;
  struct Chunk {
    const char* data;
    size_t size;
    uint32_t crc;
  };
  std::vector<Chunk> chunks;
  for (const auto& p : in.pieces)
    for (size_t off = 0; off < p.size; off += kChunk)
      chunks.push_back({p.data + off, std::min(kChunk, p.size - off), 0});
  at::parallel_for(0, static_cast<int64_t>(chunks.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      if (chunks[i].size >= 4096) chunks[i].crc = crc32c_extend(0, chunks[i].data, chunks[i].size);
  });
  uint32_t crc = 0;
  for (const Chunk& c : chunks)  // small pieces: cheaper to extend than to combine
    crc = c.size >= 4096 ? crc32c_combine(crc, c.crc, c.size) : crc32c_extend(crc, c.data, c.size);
  return crc;
}

}  // namespace

namespace {

// Appends to a new file through two aligned buffers written with O_DIRECT
// by a second thread, so filling one overlaps writing the other and the bytes
// skip the page cache (copying into the page cache can alone be slower than
// the disk). Falls back to plain writes where the file
// system refuses O_DIRECT. Any short write is an error.
class FileSink {
 public:
  FileSink(const std::string& tmp, const std::string& path) : tmp_(tmp), path_(path) {
    fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    if (fd_ < 0) {
      direct_ = false;
      fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    if (fd_ < 0) throw std::runtime_error(path + ": cannot create checkpoint file");
    for (auto& b : buffers_) {
      void* p = nullptr;
      if (posix_memalign(&p, kAlign, kBufferBytes) != 0) throw std::bad_alloc();
      b.reset(static_cast<char*>(p));
    }
  }
  ~FileSink() {
    if (pending_.valid()) pending_.wait();
    if (fd_ >= 0) {  // not committed: leave nothing behind
      ::close(fd_);
      ::unlink(tmp_.c_str());
    }
  }
  size_t write(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    for (size_t done = 0; done < size;) {
      const size_t n = std::min(size - done, kBufferBytes - filled_);
      std::memcpy(buffers_[current_].get() + filled_, p + done, n);
      filled_ += n;
      done += n;
      if (filled_ == kBufferBytes) flush_buffer();
    }
    return size;
  }
  // Writes the tail, fsyncs, closes and renames over the final name.
  void commit() {
    if (pending_.valid()) pending_.get();
    const size_t aligned = direct_ ? filled_ / kAlign * kAlign : 0;
    write_all(buffers_[current_].get(), aligned);
    // The tail is not a whole block: write it without O_DIRECT.
    if (direct_ && ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_DIRECT) != 0) fail_write();
    write_all(buffers_[current_].get() + aligned, filled_ - aligned);
    const int fd = fd_;
    fd_ = -1;
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
      ::unlink(tmp_.c_str());
      throw std::runtime_error(path_ + ": could not flush checkpoint to disk");
    }
    fs::rename(tmp_, path_);
  }

 private:
  static constexpr size_t kAlign = 4096;
  static constexpr size_t kBufferBytes = size_t{32} << 20;

  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  [[noreturn]] void fail_write() const {
    throw std::runtime_error(path_ + ": write failed (" + std::strerror(errno) +
                             "); the previous checkpoints are untouched");
  }
  void write_all(const char* p, size_t size) {
    for (size_t done = 0; done < size;) {
      ssize_t n = ::write(fd_, p + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EINVAL && direct_) {  // a file system that opens with O_DIRECT but will not write so
        if (::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_DIRECT) != 0) fail_write();
        direct_ = false;
        continue;
      }
      if (n <= 0) fail_write();
      done += static_cast<size_t>(n);
    }
  }
  // Hands the full buffer to the writer thread and continues in the other.
  void flush_buffer() {
    if (pending_.valid()) pending_.get();  // rethrows a failed write
    const char* full = buffers_[current_].get();
    pending_ = std::async(std::launch::async, [this, full] { write_all(full, kBufferBytes); });
    current_ ^= 1;
    filled_ = 0;
  }

  std::string tmp_, path_;
  int fd_ = -1;
  bool direct_ = true;
  std::unique_ptr<char, Free> buffers_[2];
  int current_ = 0;
  size_t filled_ = 0;
  std::future<void> pending_;
};

}  // namespace

void save_checkpoint_file(const std::string& path, const c10::impl::GenericDict& dict_in) {
  c10::impl::GenericDict dict = dict_in.copy();
  (void)dict.erase("__checksum__");
  const int64_t checksum = content_checksum(c10::IValue(dict));
  dict.insert("__checksum__", checksum);
  // As torch::pickle_save lays the file out (data.pkl + one record per
  // tensor, which torch.load reads), but each tensor goes from its own
  // storage straight to the file instead of through a copy of the whole
  // archive in memory.
  std::vector<char> pickle;
  torch::jit::Pickler pickler([&](const char* p, size_t n) { pickle.insert(pickle.end(), p, p + n); });
  pickler.protocol();
  pickler.pushIValue(c10::IValue(dict));
  pickler.stop();
  FileSink sink(path + ".tmp", path);
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) { return sink.write(p, n); });
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
    writer.writeEndOfFile();
  }
  sink.commit();
}

namespace {

// `dict` with its "__checksum__" checked and removed; without one, a warning
// naming the file says why it cannot be verified.
c10::impl::GenericDict verified(c10::impl::GenericDict dict, const std::string& path,
                                const std::string& why_unchecked) {
  if (!dict.contains("__checksum__") || !dict.at("__checksum__").isInt()) {
    log::warn(path + ": its contents cannot be verified: " + why_unchecked);
    return dict;
  }
  const int64_t stored = dict.at("__checksum__").toInt();
  (void)dict.erase("__checksum__");
  if (content_checksum(c10::IValue(dict)) != static_cast<uint32_t>(stored))
    throw std::runtime_error(path + ": checksum mismatch, the checkpoint is corrupt or was changed after zoo wrote it");
  return dict;
}

// A file written by Python's torch.save: a plain state dict (keys with or
// without "model."), or a dict whose "model" entry is one. Becomes {"model": ...}.
c10::impl::GenericDict load_torch_save_weights(const std::string& path) {
  convert::PyRef root;
  try {
    root = convert::read_torch_save(path);
  } catch (const std::exception&) {
    throw std::runtime_error(path + ": not a readable zoo checkpoint or torch.save file (truncated or corrupt?)");
  }
  using Kind = convert::PyObject::Kind;
  if (root->kind != Kind::dict)
    throw std::runtime_error(path + ": holds a Python " +
                             (root->kind == Kind::list || root->kind == Kind::tuple ? "list" : "value") +
                             ", not a checkpoint (a dict with 'model') or a state dict (a dict of tensors)");
  // A zoo checkpoint that Python loaded and saved again: the whole state,
  // its stored checksum checked as for the original.
  const bool zoo_checkpoint = std::any_of(root->entries.begin(), root->entries.end(), [](const auto& e) {
    return e.first->kind == Kind::string && e.first->s == "__metadata__";
  });
  if (zoo_checkpoint) {
    c10::IValue whole;
    try {
      whole = convert::to_ivalue(root);
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ": a checkpoint re-saved by Python holds " + e.what());
    }
    return verified(whole.toGenericDict(), path, "it was saved again by Python's torch.save without zoo's checksum");
  }
  convert::PyRef weights = root;
  int64_t global_step = -1;
  for (const auto& [k, v] : root->entries) {
    if (k->s == "model" && v->kind == Kind::dict) weights = v;
    if (k->s == "global_step" && v->kind == Kind::integer) global_step = v->i;
  }
  std::map<std::string, torch::Tensor> tensors = convert::tensor_dict(weights);
  if (tensors.empty()) throw std::runtime_error(path + ": holds no tensors to load as model weights");
  c10::impl::GenericDict model(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [k, t] : tensors) model.insert(k, t);
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  out.insert("model", model);
  if (global_step >= 0) out.insert("global_step", global_step);
  return out;
}

}  // namespace

namespace {

// A dict of tensors alone, as torch.save(model.state_dict()) writes it,
// rather than a checkpoint holding {"model": ..., "optimizer": ..., ...}.
bool is_plain_state_dict(const c10::impl::GenericDict& dict) {
  if (dict.empty() || dict.contains("model")) return false;
  for (const auto& kv : dict)
    if (!kv.key().isString() || !kv.value().isTensor()) return false;
  return true;
}

// The checkpoint file mapped copy-on-write into memory: each tensor's
// storage points at its record in the mapping instead of a fresh buffer the
// file is copied into (that copy, and zeroing the new pages for it, were most
// of the read time). Tensors stay writable; a write copies only the page it
// touches. The mapping lives as long as any tensor that points into it, and
// zoo replaces checkpoint files by rename, never in place, so a mapped file
// does not change under a run.
class MappedFile {
 public:
  // `for_load`: read the whole file in now and let tensors be written (a
  // load that will touch every tensor); otherwise the mapping is read-only
  // and pages are read only where they are touched (a writable private
  // mapping is charged against memory up front: a 50 GB file would not map).
  static std::shared_ptr<MappedFile> open(const std::string& path, bool for_load = true) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return nullptr;
    struct stat st {};
    void* base = MAP_FAILED;
    const size_t size = ::fstat(fd, &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
    // Populated read-only, then made writable: populating a writable private
    // mapping would copy every page up front.
    if (size > 0) base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | (for_load ? MAP_POPULATE : 0), fd, 0);
    ::close(fd);
    if (base == MAP_FAILED) return nullptr;  // a file system without mmap: read instead
    if (for_load && ::mprotect(base, size, PROT_READ | PROT_WRITE) != 0) {
      ::munmap(base, size);
      return nullptr;
    }
    return std::shared_ptr<MappedFile>(new MappedFile(static_cast<char*>(base), size));
  }
  ~MappedFile() { ::munmap(base_, size_); }
  const char* begin() const { return base_; }
  size_t size() const { return size_; }

  // A DataPtr to the bytes at `offset`, keeping the mapping alive.
  at::DataPtr data_at(const std::shared_ptr<MappedFile>& self, size_t offset) const {
    auto* owner = new std::shared_ptr<MappedFile>(self);
    return at::DataPtr(
        base_ + offset, owner, [](void* p) { delete static_cast<std::shared_ptr<MappedFile>*>(p); },
        at::Device(at::kCPU));
  }
  // Whether the record `name` whose data starts at `offset` is stored
  // uncompressed, read from its zip local header: 30 bytes, the name with the
  // archive's folder in front, then an extra field PyTorch's writer uses to
  // pad the data to 64 bytes.
  bool stored_uncompressed(size_t offset, const std::string& name) const {
    auto u16 = [&](size_t at) {
      return static_cast<size_t>(static_cast<uint8_t>(base_[at]) | static_cast<uint8_t>(base_[at + 1]) << 8);
    };
    constexpr size_t kFixed = 30, kMaxNameAndExtra = 1024;
    for (size_t header = offset >= kFixed + kMaxNameAndExtra ? offset - kFixed - kMaxNameAndExtra : 0;
         header + kFixed <= offset; ++header) {
      if (std::memcmp(base_ + header, "PK\x03\x04", 4) != 0) continue;
      const size_t name_len = u16(header + 26);
      if (header + kFixed + name_len + u16(header + 28) != offset || name_len <= name.size()) continue;
      const char* stored_name = base_ + header + kFixed;
      if (std::memcmp(stored_name + name_len - name.size(), name.data(), name.size()) == 0 &&
          stored_name[name_len - name.size() - 1] == '/')
        return u16(header + 8) == 0;
    }
    return false;
  }

 private:
  MappedFile(char* base, size_t size) : base_(base), size_(size) {}
  char* base_;
  size_t size_;
};

// Whether every tensor in `v` that points into the mapping ends inside it,
// checked before any of their bytes are touched (a record shorter than its
// shape says would otherwise read past the end of the file).
bool tensors_within(const c10::IValue& v, const MappedFile& file) {
  if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict())
      if (!tensors_within(kv.value(), file)) return false;
  } else if (v.isList()) {
    for (const auto& item : v.toListRef())
      if (!tensors_within(item, file)) return false;
  } else if (v.isTensor()) {
    const c10::Storage& s = v.toTensor().storage();
    const char* p = static_cast<const char*>(s.data());
    const char* end = file.begin() + file.size();
    if (p >= file.begin() && p < end && s.nbytes() > static_cast<size_t>(end - p)) return false;
  }
  return true;
}

// As torch::jit::readArchiveAndTensors, with tensor records taken from the
// mapping where they are stored uncompressed (always, for files PyTorch or
// zoo wrote).
c10::IValue read_mapped_archive(const std::shared_ptr<MappedFile>& file,
                                caffe2::serialize::PyTorchStreamReader& reader) {
  auto [pickle, pickle_size] = reader.getRecord("data.pkl");
  size_t pickle_read = 0;
  auto read_pickle = [&, data = static_cast<const char*>(pickle.get())](char* out, size_t n) -> size_t {
    n = std::min(n, pickle_size - pickle_read);
    std::memcpy(out, data + pickle_read, n);
    pickle_read += n;
    return n;
  };
  auto read_record = [&](const std::string& key) {
    const std::string name = "data/" + key;
    const size_t offset = reader.getRecordOffset(name);
    if (offset < file->size() && file->stored_uncompressed(offset, name)) return file->data_at(file, offset);
    return std::get<0>(reader.getRecord(name));
  };
  torch::jit::Unpickler unpickler(read_pickle, nullptr, nullptr, read_record, c10::nullopt);
  unpickler.set_version(reader.version());
  c10::IValue value = unpickler.parse_ivalue();
  if (!tensors_within(value, *file)) throw std::runtime_error("a tensor record extends past the end of the file");
  return value;
}

}  // namespace

namespace {

void refuse_non_files(const std::string& path) {
  std::error_code ec;
  const auto type = std::filesystem::status(path, ec).type();
  if (type != std::filesystem::file_type::not_found && type != std::filesystem::file_type::regular &&
      type != std::filesystem::file_type::directory)  // a FIFO would block the read, a device never end
    throw std::runtime_error(path + ": not a regular file (a pipe or device); a checkpoint is a file on disk");
  if (!std::ifstream(path)) throw std::runtime_error(path + ": cannot open checkpoint");
  if (std::filesystem::file_size(path, ec) == 0 && !ec)
    throw std::runtime_error(path + ": is empty (0 bytes), not a checkpoint; an interrupted copy?");
}

}  // namespace

c10::IValue read_checkpoint_as_stored(const std::string& path) {
  refuse_non_files(path);
  auto file = MappedFile::open(path, /*for_load=*/false);
  if (!file) throw std::runtime_error(path + ": cannot map the file into memory");
  try {
    caffe2::serialize::PyTorchStreamReader reader(std::make_shared<caffe2::serialize::FileAdapter>(path));
    return read_mapped_archive(file, reader);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not a checkpoint zoo or PyTorch's torch.save wrote (" +
                             std::string(e.what()).substr(0, 200) + ")");
  }
}

c10::impl::GenericDict load_checkpoint_file(const std::string& path) {
  refuse_non_files(path);
  c10::IValue value;
  try {  // as torch::pickle_load, but each tensor's storage is its record in the mapped file
    if (auto file = MappedFile::open(path)) {
      caffe2::serialize::PyTorchStreamReader reader(std::make_shared<caffe2::serialize::FileAdapter>(path));
      value = read_mapped_archive(file, reader);
    } else {
      caffe2::serialize::PyTorchStreamReader reader(path);
      value = torch::jit::readArchiveAndTensors("data", "", "", c10::nullopt, c10::nullopt, c10::nullopt, reader);
    }
  } catch (const std::exception& e) {
    value = c10::IValue();
  }
  if (!value.isGenericDict()) return load_torch_save_weights(path);
  c10::impl::GenericDict dict = value.toGenericDict();
  if (is_plain_state_dict(dict)) {  // torch.save(model.state_dict()) that LibTorch's unpickler read
    c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
    out.insert("model", dict);
    return out;
  }
  dict = verified(dict, path, "it has no checksum (written by another tool?)");
  return dict.contains("__sharded__") ? assemble_sharded(dict, path) : dict;
}

}  // namespace zoo::ckpt
