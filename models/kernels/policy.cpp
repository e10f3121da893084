// Implementation of models/kernels/policy.h.
#include "models/kernels/policy.h"

#include <sstream>
#include <stdexcept>

namespace zoo::models {
namespace {
KernelPolicy& current() {
  static KernelPolicy policy = KernelPolicy::all();
  return policy;
}
}  // namespace

const std::set<std::string>& cuda_kernel_names() {
  // weight_copies: the dense layer's kept 16-bit weights (models/kernels/weight_copies.h);
  // dense_heads: q, k and v's projection handing out its heads (models/common/layers.h).
  static const std::set<std::string> names = {
      "adam", "cross_entropy", "cross_entropy_fused", "dense", "dense_heads", "embedding", "norm", "weight_copies"};
  return names;
}

KernelPolicy KernelPolicy::all() {
  KernelPolicy p;
  p.cuda_kernels = cuda_kernel_names();
  return p;
}

KernelPolicy KernelPolicy::reference() {
  KernelPolicy p;
  p.cpu_kernels = false;
  return p;
}

std::set<std::string> parse_cuda_kernels(const std::string& value) {
  if (value.empty() || value == "all" || value == "1") return cuda_kernel_names();
  if (value == "none" || value == "0") return {};
  std::set<std::string> names;
  std::stringstream list(value);
  for (std::string name; std::getline(list, name, ',');) {
    if (!cuda_kernel_names().count(name)) {
      std::string known;
      for (const std::string& k : cuda_kernel_names()) known += (known.empty() ? "" : ", ") + k;
      throw std::invalid_argument("unknown kernel '" + name + "' in '" + value +
                                  "' (expected all, none, or a comma list of: " + known + ")");
    }
    names.insert(name);
  }
  return names;
}

void set_kernel_policy(const KernelPolicy& policy) { current() = policy; }

const KernelPolicy& kernel_policy() { return current(); }

}  // namespace zoo::models
