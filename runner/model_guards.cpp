// Implementation of runner/model_guards.h.
#include "runner/model_guards.h"

#include <new>
#include <set>
#include <stdexcept>

#include "models/common/lora.h"
#include "models/fusion.h"
#include "models/registry.h"
#include "runner/amp/autocast.h"
#include "runner/log.h"

namespace zoo {

void apply_lora_params(models::Model& model, const Params& params, const torch::Device& device) {
  std::vector<models::LoraLayer> adapted;
  try {
    adapted = models::apply_lora(model, params.lora);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(params.file + ": model." + e.what());
  }
  // The frozen base needs no float32 master copy: on a GPU with mixed
  // precision its matrices are held in the compute dtype (norms stay float32).
  const auto half = amp::autocast_dtype(params.precision.mixed_precision, params.precision.fp16_type, device);
  if (device.is_cuda() && half) {
    const std::set<std::string> norms = models::norm_parameter_names(model);
    torch::NoGradGuard no_grad;
    for (auto& p : model.named_parameters())
      if (!p.value().requires_grad() && p.value().is_floating_point() && !norms.count(p.key()))
        p.value().set_data(p.value().to(*half));
  }
}

std::shared_ptr<models::Model> build_model(const Params& params, const torch::Device& device) {
  try {
    std::shared_ptr<models::Model> model = params.model->build(torch::TensorOptions().device(device));
    models::apply_fusion(*model);
    if (!params.lora.empty()) apply_lora_params(*model, params, device);
    return model;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const bool out_of_memory = dynamic_cast<const std::bad_alloc*>(&e) ||
                               what.find("can't allocate memory") != std::string::npos ||
                               what.find("out of memory") != std::string::npos;
    if (!out_of_memory) throw;
    const int64_t count = models::parameter_count(*params.model->build(torch::TensorOptions().device(torch::kMeta)));
    const std::string reason = what.substr(0, what.find('\n'));
    throw std::runtime_error(
        strf("%s: model (%s): its %ld parameters need %.1f GiB in float32 on %s, before "
             "gradients and optimizer state, and memory ran out (%s); shrink the model or use a "
             "larger machine",
             params.file.c_str(), params.model_name.c_str(), static_cast<long>(count),
             static_cast<double>(count) * 4 / double(1 << 30), device.str().c_str(), reason.c_str()));
  }
}

// One float32 sum per tensor (NaN and inf survive a sum; finite weights
// cannot reach float32's limit), read back together: one sync for the model.
std::vector<std::string> non_finite_parameters(const torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  const auto named = model.named_parameters(/*recurse=*/true);
  if (named.is_empty()) return {};
  std::vector<torch::Tensor> sums;
  for (const auto& item : named) sums.push_back(item.value().sum(torch::kFloat));
  const torch::Tensor finite = torch::isfinite(torch::stack(sums)).cpu();
  std::vector<std::string> bad;
  if (finite.all().item<bool>()) return bad;
  const auto flags = finite.accessor<bool, 1>();
  for (int64_t i = 0; i < flags.size(0); ++i)
    if (!flags[i]) bad.push_back(named[static_cast<size_t>(i)].key());
  return bad;
}

}  // namespace zoo
