// Implementation of models/common/cuda/kernel_glue.h.
#include "models/common/cuda/kernel_glue.h"

#ifdef ZOO_CUDA_KERNELS
#include <c10/cuda/CUDAStream.h>
#endif

#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

namespace zoo::cuda {
namespace {

// weight_copies: the dense layer's kept 16-bit weights (models/common/weight_copies.h);
// dense_heads: q, k and v's projection handing out its heads (models/common/layers.h).
const std::set<std::string> kKernelNames = {"adam",      "cross_entropy", "cross_entropy_fused", "dense", "dense_heads",
                                            "embedding", "norm",          "weight_copies"};

}  // namespace

std::set<std::string> enabled_kernels(const char* env) {
  const std::string value = env ? env : "1";
  if (value == "1" || value.empty()) return kKernelNames;
  if (value == "0") return {};
  std::set<std::string> names;
  std::stringstream list(value);
  for (std::string name; std::getline(list, name, ',');) {
    if (!kKernelNames.count(name)) {
      std::string known;
      for (const std::string& k : kKernelNames) known += (known.empty() ? "" : ", ") + k;
      throw std::runtime_error("ZOO_CUDA_KERNELS=" + value + ": unknown kernel '" + name +
                               "' (expected 1, 0, or a comma list of: " + known + ")");
    }
    names.insert(name);
  }
  return names;
}

bool kernel_enabled(const char* name) {
  static const std::set<std::string> enabled = enabled_kernels(std::getenv("ZOO_CUDA_KERNELS"));
  return enabled.count(name) > 0;
}

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
    case at::kFloat:
      return ElementType::f32;
    case at::kBFloat16:
      return ElementType::bf16;
    case at::kHalf:
      return ElementType::f16;
    default:
      return std::nullopt;
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
                             " (ZOO_CUDA_KERNELS=0 in the environment runs LibTorch's ops instead)");
}

}  // namespace zoo::cuda
