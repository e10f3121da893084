// Implementation of models/kernels/cuda/kernel_glue.h.
#include "models/kernels/cuda/kernel_glue.h"

#include "models/kernels/policy.h"

#ifdef ZOO_CUDA_KERNELS
#include <c10/cuda/CUDAStream.h>
#endif

#include <set>
#include <stdexcept>
#include <string>

namespace zoo::cuda {

std::set<std::string> enabled_kernels(const char* value) {
  try {
    return models::parse_cuda_kernels(value ? value : "");
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("ZOO_CUDA_KERNELS=") + (value ? value : "") + ": " + e.what());
  }
}

bool kernel_enabled(const char* name) { return models::kernel_policy().cuda_kernels.count(name) > 0; }

bool kernel_available(const char* name) {
#ifdef ZOO_CUDA_KERNELS
  return kernel_enabled(name);
#else
  (void)name;
  return false;
#endif
}

std::optional<ElementType> element_type_of(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return ElementType::f32;
    case at::kBFloat16: return ElementType::bf16;
    case at::kHalf: return ElementType::f16;
    default: return std::nullopt;
  }
}

LaunchScope::LaunchScope(const at::Tensor& on) {
  if (!on.is_cuda()) return;
#ifdef ZOO_CUDA_KERNELS
  guard_.reset_device(on.device());
  stream_ = c10::cuda::getCurrentCUDAStream().stream();
#else
  throw std::logic_error("zoo was built without its CUDA kernels (-DZOO_CUDA_KERNELS=ON)");
#endif
}

void check_launch(const char* error, const char* kernel) {
  if (error)
    throw std::runtime_error(std::string("zoo's CUDA ") + kernel + ": " + error +
                             " (runconfig.cuda_kernels: none, or ZOO_CUDA_KERNELS=0 in the environment, runs "
                             "LibTorch's ops instead)");
}

}  // namespace zoo::cuda
