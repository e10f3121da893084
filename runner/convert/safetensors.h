// The safetensors format (Hugging Face's default weights file): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets}}, then the raw tensor bytes. Defines: TensorMap,
// SafetensorsHeader, read_safetensors_header,
// read_safetensors, read_hf_weights, write_safetensors.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace zoo::convert {

using TensorMap = std::map<std::string, torch::Tensor>;

// A safetensors file's header alone: each tensor's name, dtype, shape and
// byte range within the data that follows the header (checked against the
// file's size), and the __metadata__ strings.
struct SafetensorsHeader {
  struct Entry {
    std::string name;
    torch::ScalarType dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;
  };
  std::vector<Entry> tensors;
  uint64_t data_start = 0;
  std::map<std::string, std::string> metadata;
};
SafetensorsHeader read_safetensors_header(const std::string& path);
// Throws std::runtime_error naming the file for bad headers or sizes.
TensorMap read_safetensors(const std::string& path);
// A Hugging Face checkpoint: model.safetensors, pytorch_model.bin, a sharded
// *.index.json of either, or a directory holding one of them.
TensorMap read_hf_weights(const std::string& path);
// Writes atomically; `metadata` goes to the header's __metadata__.
void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace zoo::convert
