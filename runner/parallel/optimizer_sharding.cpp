// Implementation of runner/parallel/optimizer_sharding.h.
#include "runner/parallel/optimizer_sharding.h"

#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <numeric>

#include "runner/log.h"

namespace zoo {

OptimizerSharding::OptimizerSharding(Distributed& d, const std::vector<torch::Tensor>& parameters)
    : distributed_(d), owner_(parameters.size(), 0) {
  std::vector<size_t> order(parameters.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return parameters[a].numel() > parameters[b].numel(); });
  std::vector<int64_t> load(static_cast<size_t>(d.world_size()), 0);
  for (size_t i : order) {
    const int least = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner_[i] = least;
    load[static_cast<size_t>(least)] += parameters[i].numel();
  }
  log::info(strf("Optimizer state sharded over %d ranks: this rank keeps %.1f%% of it", d.world_size(),
                 100.0 * double(load[static_cast<size_t>(d.rank())]) /
                     double(std::max<int64_t>(1, std::accumulate(load.begin(), load.end(), int64_t{0})))));
}

void OptimizerSharding::keep_own_gradients(const std::vector<torch::Tensor>& parameters) const {
  for (size_t i = 0; i < parameters.size(); ++i)
    if (!owns(i)) const_cast<torch::Tensor&>(parameters[i]).mutable_grad() = torch::Tensor();
}

void OptimizerSharding::share_updated(const std::vector<torch::Tensor>& parameters) {
  for (int r = 0; r < distributed_.world_size(); ++r) {
    std::vector<torch::Tensor> owned;
    for (size_t i = 0; i < parameters.size(); ++i)
      if (owner_[i] == r) owned.push_back(parameters[i].detach());
    distributed_.broadcast(owned, r);
  }
}

void OptimizerSharding::drop_others_state(optim::Optimizer& optimizer) const {
  std::vector<bool> keep(owner_.size());
  for (size_t i = 0; i < owner_.size(); ++i) keep[i] = owns(i);
  optimizer.keep_state_of(keep);
}

c10::impl::GenericDict OptimizerSharding::full_state_dict(const optim::Optimizer& optimizer) {
  c10::impl::GenericDict full = optimizer.state_dict();
  c10::impl::GenericDict state = full.at("state").toGenericDict();
  // This rank's share travels as one pickle (names, shapes and dtypes
  // included), taken before the others' shares join `state`.
  const std::vector<char> own = torch::jit::pickle_save(c10::IValue(state));
  for (int r = 0; r < distributed_.world_size(); ++r) {
    std::vector<char> bytes;
    if (r == distributed_.rank()) bytes = own;
    distributed_.broadcast_bytes(bytes, r);
    if (r == distributed_.rank()) continue;
    for (const auto& kv : torch::jit::pickle_load(bytes).toGenericDict()) state.insert_or_assign(kv.key(), kv.value());
  }
  full.insert_or_assign("state", state);
  return full;
}

}  // namespace zoo
