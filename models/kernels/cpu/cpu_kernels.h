// What zoo's CPU kernels (attention, dense, norm, embedding, cross-entropy,
// AdamW) share about the tensors they take.
// Defines: is_cpu_float32, absent_as_empty.
#pragma once

#include <ATen/ATen.h>

namespace zoo::models {

// A float32 tensor on the CPU: the only kind the kernels compute on.
inline bool is_cpu_float32(const at::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == at::kFloat; }

// LibTorch 1.13's Function::apply takes no undefined inputs: an absent
// optional one (a layer without bias) travels as an empty tensor, which the
// kernels read as "none".
inline at::Tensor absent_as_empty(const at::Tensor& t, const at::TensorOptions& options) {
  return t.defined() ? t : at::empty({0}, options);
}

}  // namespace zoo::models
