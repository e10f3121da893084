// Implementation of runner/convert/safetensors.h.
#include "runner/convert/safetensors.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "runner/checkpoint/torch_pickle.h"
#include "runner/convert/hf_config.h"

namespace zoo::convert {

namespace {
namespace fs = std::filesystem;

const std::map<std::string, torch::ScalarType> kDtypes = {
    {"F64", torch::kDouble}, {"F32", torch::kFloat}, {"F16", torch::kHalf},  {"BF16", torch::kBFloat16},
    {"I64", torch::kLong},   {"I32", torch::kInt},   {"I16", torch::kShort}, {"I8", torch::kChar},
    {"U8", torch::kByte},    {"BOOL", torch::kBool}};

std::string dtype_name(torch::ScalarType t) {
  for (const auto& [name, type] : kDtypes)
    if (type == t) return name;
  throw std::runtime_error(std::string("safetensors: unsupported dtype ") + c10::toString(t));
}
struct TensorEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// One header entry, checked field by field: the header comes with downloaded files.
TensorEntry tensor_entry(const std::string& path, const std::string& name, const nlohmann::json& info) {
  auto bad = [&](const std::string& what) {
    return std::runtime_error(path + ": " + name + ": " + what + " in the safetensors header, got " + info.dump());
  };
  if (!info.is_object()) throw bad("expected an object with dtype, shape and data_offsets");
  TensorEntry e;
  if (!info.contains("dtype") || !info.at("dtype").is_string()) throw bad("expected dtype as a string");
  e.dtype = info.at("dtype").get<std::string>();
  if (!info.contains("shape") || !info.at("shape").is_array()) throw bad("expected shape as a list of sizes");
  for (const auto& d : info.at("shape")) {
    if (!d.is_number_unsigned()) throw bad("expected shape as a list of sizes >= 0");
    e.shape.push_back(d.get<int64_t>());
  }
  const auto& o = info.contains("data_offsets") ? info.at("data_offsets") : nlohmann::json();
  if (!o.is_array() || o.size() != 2 || !o[0].is_number_unsigned() || !o[1].is_number_unsigned())
    throw bad("expected data_offsets as [begin, end]");
  e.begin = o[0].get<uint64_t>();
  e.end = o[1].get<uint64_t>();
  return e;
}

// Bytes of a tensor of `shape`, or an error when they overflow 64 bits.
uint64_t byte_size(const std::string& path, const std::string& name, const std::vector<int64_t>& shape,
                   size_t element_size) {
  uint64_t bytes = element_size;
  for (int64_t d : shape) {
    if (d < 0 || (d != 0 && bytes > UINT64_MAX / static_cast<uint64_t>(d)))
      throw std::runtime_error(path + ": " + name + ": shape " + nlohmann::json(shape).dump() + " is too large");
    bytes *= static_cast<uint64_t>(d);
  }
  return bytes;
}
}  // namespace

SafetensorsHeader read_safetensors_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), 8);  // little-endian on every platform zoo supports
  const uint64_t file_size = fs::file_size(path);
  if (!in || file_size < 8 || header_size > file_size - 8)
    throw std::runtime_error(path + ": not a safetensors file (bad header size)");
  std::string header(header_size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_size));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": safetensors header is not JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw std::runtime_error(path + ": safetensors header is not a JSON object");
  SafetensorsHeader out;
  out.data_start = 8 + header_size;
  const uint64_t data_size = file_size - out.data_start;
  for (const auto& [name, info] : j.items()) {
    if (name == "__metadata__") {
      if (info.is_object())
        for (const auto& [k, v] : info.items())
          if (v.is_string()) out.metadata[k] = v.get<std::string>();
      continue;
    }
    const TensorEntry e = tensor_entry(path, name, info);
    auto dt = kDtypes.find(e.dtype);
    if (dt == kDtypes.end()) throw std::runtime_error(path + ": " + name + ": unsupported dtype \"" + e.dtype + "\"");
    const uint64_t bytes = byte_size(path, name, e.shape, c10::elementSize(dt->second));
    if (e.end > data_size || e.end < e.begin || e.end - e.begin != bytes)
      throw std::runtime_error(path + ": " + name + ": data_offsets do not match its shape and dtype");
    out.tensors.push_back({name, dt->second, e.shape, e.begin, e.end});
  }
  return out;
}

TensorMap read_safetensors(const std::string& path) {
  const SafetensorsHeader header = read_safetensors_header(path);
  // Each tensor is read straight into its own memory: no copy of the whole
  // file is held, which matters for multi-GB shards.
  std::ifstream in(path, std::ios::binary);
  TensorMap out;
  for (const auto& e : header.tensors) {
    torch::Tensor t = torch::empty(e.shape, torch::dtype(e.dtype));
    in.seekg(static_cast<std::streamoff>(header.data_start + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    if (!in) throw std::runtime_error(path + ": " + e.name + ": cannot read its data");
    out[e.name] = t;
  }
  return out;
}

TensorMap read_hf_weights(const std::string& path_in) {
  fs::path path(path_in);
  if (fs::is_directory(path)) {
    bool found = false;
    for (const char* name :
         {"model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json", "pytorch_model.bin"}) {
      if (fs::exists(path / name)) {
        path /= name;
        found = true;
        break;
      }
    }
    if (!found)
      throw std::runtime_error(path_in + ": no model.safetensors, pytorch_model.bin or their sharded index json");
  }
  const std::string p = path.string();
  auto ends_with = [&](const std::string& suffix) {
    return p.size() >= suffix.size() && p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  auto read_one = [](const std::string& file) {
    const bool pickle = file.size() > 4 && file.compare(file.size() - 4, 4, ".bin") == 0;
    return pickle ? tensor_dict(read_torch_save(file)) : read_safetensors(file);
  };
  if (ends_with(".json")) {
    const nlohmann::json index = read_json_object(p, "a sharded checkpoint's index with a weight_map");
    if (!index.contains("weight_map") || !index.at("weight_map").is_object())
      throw std::runtime_error(p + ": expected a \"weight_map\" object of tensor name -> shard file");
    TensorMap out;
    std::set<std::string> shards;
    for (const auto& [name, file] : index.at("weight_map").items()) {
      if (!file.is_string() || file.get<std::string>().empty())
        throw std::runtime_error(p + ": weight_map." + name + ": expected a shard file name, got " + file.dump());
      shards.insert(file.get<std::string>());
    }
    for (const auto& shard : shards)
      for (auto& [name, t] : read_one((path.parent_path() / shard).string())) out[name] = t;
    return out;
  }
  return read_one(p);
}

void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header;
  uint64_t offset = 0;
  std::vector<torch::Tensor> ordered;
  for (const auto& [name, t_in] : tensors) {
    torch::Tensor t = t_in.detach().cpu().contiguous();
    header[name] = {{"dtype", dtype_name(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
    ordered.push_back(t);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << text;
    for (const auto& t : ordered)
      out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    if (!out.flush()) throw std::runtime_error(path + ": write failed");
  }
  fs::rename(tmp, path);
}

}  // namespace zoo::convert
