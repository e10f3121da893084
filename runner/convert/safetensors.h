// The safetensors format (Hugging Face's default weights file): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets}}, then the raw tensor bytes. Defines: TensorMap,
// read_safetensors, read_hf_weights, write_safetensors.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

namespace zoo::convert {

using TensorMap = std::map<std::string, torch::Tensor>;

// Throws std::runtime_error naming the file for bad headers or sizes.
TensorMap read_safetensors(const std::string& path);
// A Hugging Face checkpoint: model.safetensors, pytorch_model.bin, a sharded
// *.index.json of either, or a directory holding one of them.
TensorMap read_hf_weights(const std::string& path);
// Writes atomically; `metadata` goes to the header's __metadata__.
void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace zoo::convert
