// The element types zoo's CUDA kernels read and write, named without CUDA
// headers so that host code can pick one. Defines: ElementType.
#pragma once

namespace zoo::cuda {

enum class ElementType { f32, bf16, f16 };

}  // namespace zoo::cuda
