// Implementation of data/npy.h. The .npy layout is NumPy's format spec
// (magic, version, a Python-dict header of descr / fortran_order / shape,
// then the raw array); .npz is a ZIP archive of them, read from its central
// directory (ZIP64 fields included: np.savez forces them).
#include "data/npy.h"

#include <zlib.h>

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace zoo::data {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& why) { throw std::runtime_error(what + ": " + why); }

// The value text of 'key' in the header dict, up to the next top-level comma or closing brace.
std::string header_value(const std::string& header, const std::string& key, const std::string& what) {
  const size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) fail(what, "the .npy header has no '" + key + "' (header: " + header + ")");
  size_t i = header.find(':', at);
  if (i == std::string::npos) fail(what, "malformed .npy header: " + header);
  ++i;
  while (i < header.size() && header[i] == ' ') ++i;
  int depth = 0;
  size_t end = i;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
    if (depth < 0) break;
  }
  return header.substr(i, end - i + (header[end] == ')' ? 1 : 0));
}

torch::ScalarType dtype_of(const std::string& descr, const std::string& what) {
  // '<f4', '|u1', ...: byte order, kind, size.
  if (descr.size() < 3) fail(what, "unreadable dtype " + descr);
  const char order = descr[0];
  const std::string code = descr.substr(1);
  if (order == '>' && code != "i1" && code != "u1" && code != "b1")
    fail(what, "big-endian array (dtype " + descr + "); expected little-endian");
  if (code == "f4") return torch::kFloat;
  if (code == "f8") return torch::kDouble;
  if (code == "f2") return torch::kHalf;
  if (code == "i8") return torch::kLong;
  if (code == "i4") return torch::kInt;
  if (code == "i2") return torch::kShort;
  if (code == "i1") return torch::kChar;
  if (code == "u1") return torch::kByte;
  if (code == "b1") return torch::kBool;
  fail(what, "dtype " + descr + " is not one zoo reads (expected bool, int8..int64, uint8 or float16/32/64)");
}

uint16_t u16(const unsigned char* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t u32(const unsigned char* p) { return uint32_t(u16(p)) | (uint32_t(u16(p + 2)) << 16); }
uint64_t u64(const unsigned char* p) { return uint64_t(u32(p)) | (uint64_t(u32(p + 4)) << 32); }

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail(path, "cannot open");
  std::vector<char> bytes(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  if (!in.read(bytes.data(), std::streamsize(bytes.size()))) fail(path, "cannot read");
  return bytes;
}

struct ZipMember {
  std::string name;
  uint16_t method = 0;
  uint64_t compressed = 0, uncompressed = 0, local_offset = 0;
};

std::vector<ZipMember> central_directory(const std::vector<char>& file, const std::string& path) {
  const auto* b = reinterpret_cast<const unsigned char*>(file.data());
  const size_t n = file.size();
  // The end-of-central-directory record: 22 bytes plus a comment of at most 64 KiB.
  size_t eocd = std::string::npos;
  for (size_t i = n >= 22 ? n - 22 : 0; n >= 22; --i) {
    if (u32(b + i) == 0x06054b50) {
      eocd = i;
      break;
    }
    if (i == 0 || n - i > 22 + 65535) break;
  }
  if (eocd == std::string::npos) fail(path, "not a .npz file (no ZIP directory at its end)");
  uint64_t entries = u16(b + eocd + 10), dir_offset = u32(b + eocd + 16);
  if ((entries == 0xFFFF || dir_offset == 0xFFFFFFFF) && eocd >= 20 && u32(b + eocd - 20) == 0x07064b50) {
    const uint64_t z64 = u64(b + eocd - 20 + 8);
    if (z64 + 56 > n || u32(b + z64) != 0x06064b50) fail(path, "damaged ZIP64 directory");
    entries = u64(b + z64 + 32);
    dir_offset = u64(b + z64 + 48);
  }
  std::vector<ZipMember> members;
  size_t p = dir_offset;
  for (uint64_t e = 0; e < entries; ++e) {
    if (p + 46 > n || u32(b + p) != 0x02014b50) fail(path, "damaged ZIP directory");
    ZipMember m;
    m.method = u16(b + p + 10);
    m.compressed = u32(b + p + 20);
    m.uncompressed = u32(b + p + 24);
    const size_t name_len = u16(b + p + 28), extra_len = u16(b + p + 30), comment_len = u16(b + p + 32);
    m.local_offset = u32(b + p + 42);
    if (p + 46 + name_len + extra_len > n) fail(path, "damaged ZIP directory");
    m.name.assign(file.data() + p + 46, name_len);
    // ZIP64 extra field: the 64-bit values of the fields saturated above, in this order.
    for (size_t x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
      const uint16_t id = u16(b + x), size = u16(b + x + 2);
      if (id == 0x0001) {
        size_t v = x + 4;
        if (m.uncompressed == 0xFFFFFFFF && v + 8 <= x + 4 + size) m.uncompressed = u64(b + v), v += 8;
        if (m.compressed == 0xFFFFFFFF && v + 8 <= x + 4 + size) m.compressed = u64(b + v), v += 8;
        if (m.local_offset == 0xFFFFFFFF && v + 8 <= x + 4 + size) m.local_offset = u64(b + v);
      }
      x += 4 + size;
    }
    members.push_back(m);
    p += 46 + name_len + extra_len + comment_len;
  }
  return members;
}

std::vector<char> member_bytes(const std::vector<char>& file, const ZipMember& m, const std::string& what) {
  const auto* b = reinterpret_cast<const unsigned char*>(file.data());
  const size_t n = file.size();
  if (m.local_offset + 30 > n || u32(b + m.local_offset) != 0x04034b50) fail(what, "damaged ZIP member header");
  const size_t data = m.local_offset + 30 + u16(b + m.local_offset + 26) + u16(b + m.local_offset + 28);
  if (data + m.compressed > n) fail(what, "the archive ends inside this member (a truncated file?)");
  if (m.method == 0) return std::vector<char>(file.begin() + long(data), file.begin() + long(data + m.compressed));
  if (m.method != 8)
    fail(what, "ZIP compression method " + std::to_string(m.method) + " (zoo reads stored and deflated)");
  std::vector<char> out(m.uncompressed);
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) fail(what, "cannot start zlib");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(file.data() + data));
  z.avail_in = static_cast<uInt>(m.compressed);
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_FINISH);
  inflateEnd(&z);
  if (rc != Z_STREAM_END || z.total_out != out.size()) fail(what, "corrupt deflated data");
  return out;
}

}  // namespace

torch::Tensor parse_npy(const std::vector<char>& bytes, const std::string& what) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
    fail(what, "not a .npy array (no \\x93NUMPY magic)");
  const int major = b[6];
  const size_t header_len = major == 1 ? u16(b + 8) : u32(b + 8);
  const size_t header_at = major == 1 ? 10 : 12;
  if (major < 1 || major > 3 || header_at + header_len > bytes.size()) fail(what, "unreadable .npy header");
  const std::string header(bytes.data() + header_at, header_len);
  std::string descr = header_value(header, "descr", what);
  if (descr.size() < 2 || descr.front() != '\'') fail(what, "structured dtype " + descr + " (expected a plain array)");
  descr = descr.substr(1, descr.size() - 2);
  const bool fortran = header_value(header, "fortran_order", what) == "True";
  std::vector<int64_t> shape;
  const std::string dims = header_value(header, "shape", what);
  for (size_t i = 0; i < dims.size();) {
    if (std::isdigit(static_cast<unsigned char>(dims[i]))) {
      size_t used = 0;
      shape.push_back(std::stoll(dims.substr(i), &used));
      i += used;
    } else {
      ++i;
    }
  }
  const torch::ScalarType dtype = dtype_of(descr, what);
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  const size_t data_at = header_at + header_len;
  const size_t nbytes = size_t(count) * torch::elementSize(dtype);
  if (bytes.size() - data_at < nbytes)
    fail(what, "holds " + std::to_string(bytes.size() - data_at) + " data bytes, expected " + std::to_string(nbytes) +
                   " for shape " + dims + " of " + descr);
  std::vector<int64_t> stored = shape;
  if (fortran) std::reverse(stored.begin(), stored.end());
  torch::Tensor t = torch::empty(stored, dtype);
  std::memcpy(t.data_ptr(), bytes.data() + data_at, nbytes);
  if (fortran && t.dim() > 1) {
    std::vector<int64_t> reversed(size_t(t.dim()));
    for (int64_t i = 0; i < t.dim(); ++i) reversed[size_t(i)] = t.dim() - 1 - i;
    t = t.permute(reversed).contiguous();
  }
  return t;
}

std::map<std::string, torch::Tensor> read_npz(const std::string& path, const std::vector<std::string>& names) {
  const std::vector<char> file = read_file(path);
  const std::vector<ZipMember> members = central_directory(file, path);
  std::map<std::string, torch::Tensor> out;
  auto load = [&](const ZipMember& m) {
    const std::string what = path + " (member " + m.name + ")";
    std::string key = m.name;
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
    out[key] = parse_npy(member_bytes(file, m, what), what);
  };
  if (names.empty()) {
    for (const auto& m : members) load(m);
    return out;
  }
  for (const auto& name : names) {
    bool found = false;
    for (const auto& m : members)
      if (m.name == name + ".npy" || m.name == name) {
        load(m);
        found = true;
        break;
      }
    if (!found) {
      std::string have;
      for (const auto& m : members) have += (have.empty() ? "" : ", ") + m.name;
      fail(path, "no array '" + name + "' (the file holds: " + have + ")");
    }
  }
  return out;
}

}  // namespace zoo::data
