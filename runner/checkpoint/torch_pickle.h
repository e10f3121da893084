// Reads files written by Python's torch.save (zip archive + pickle), such as
// Hugging Face's pytorch_model.bin or a plain state dict: LibTorch's own
// pickle reader rejects the OrderedDicts these hold. Supports the pickle
// opcodes torch.save emits and tensors rebuilt from storages.
// Defines: PyObject, read_torch_save, tensor_dict, to_ivalue.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace zoo::convert {

// A decoded Python value.
struct PyObject {
  enum class Kind { none, boolean, integer, real, string, tuple, list, dict, global, tensor };
  Kind kind = Kind::none;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;                                 // string; global: "module.name"
  std::vector<std::shared_ptr<PyObject>> items;  // tuple, list
  std::vector<std::pair<std::shared_ptr<PyObject>, std::shared_ptr<PyObject>>> entries;  // dict, in order
  torch::Tensor tensor;
};
using PyRef = std::shared_ptr<PyObject>;

// Throws std::runtime_error naming the file on anything it cannot read.
PyRef read_torch_save(const std::string& path);

// The {name: tensor} entries of a dict (nested dicts flatten with "."), e.g. a state dict.
std::map<std::string, torch::Tensor> tensor_dict(const PyRef& dict);

// The value as LibTorch's unpickler gives a file LibTorch wrote: dicts with
// string or integer keys, lists typed by their items (ints, floats, bools,
// strings or tensors; mixed or empty: Any), tuples, scalars and tensors.
// Throws std::runtime_error for what a checkpoint cannot hold (a Python class).
c10::IValue to_ivalue(const PyRef& value);

}  // namespace zoo::convert
