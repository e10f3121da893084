// Implementation of runner/parallel/full_sharding.h, continued: what a
// rank's shards hold in a checkpoint, and loading whole saved values into
// them (runner/checkpoint/sharded_checkpoint.h has the files).
#include <map>
#include <stdexcept>

#include "runner/parallel/full_sharding.h"
#include "runner/parallel/full_sharding_flat.h"

namespace zoo {

std::vector<std::string> FullSharding::optimizer_names() const { return optimizer_names_; }

std::map<std::string, std::vector<int64_t>> FullSharding::shapes() const {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& f : flats_)
    for (size_t k = 0; k < f.params.size(); ++k) out[f.names[k]] = f.params[k].sizes().vec();
  return out;
}

c10::impl::GenericList FullSharding::optimizer_param_groups(const optim::Optimizer& optimizer) const {
  c10::impl::GenericList out(c10::AnyType::get());
  int64_t index = 0;
  const c10::impl::GenericDict whole = optimizer.state_dict();
  const auto groups = whole.at("param_groups").toListRef();
  for (size_t g = 0; g < groups.size(); ++g) {
    c10::impl::GenericDict group = groups[g].toGenericDict().copy();
    std::vector<int64_t> ids;
    for (size_t k = 0; k < groups_[g].names.size(); ++k) ids.push_back(index++);
    group.insert_or_assign("params", c10::List<int64_t>(ids));
    out.push_back(group);
  }
  return out;
}

c10::impl::GenericDict FullSharding::shard_pieces(const optim::Optimizer& optimizer) const {
  const c10::impl::GenericDict state = optimizer.state_dict().at("state").toGenericDict();
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  for (const auto& f : flats_) {
    const int64_t lo = f.begin(rank_);
    const bool has_state = f.group >= 0 && state.contains(static_cast<int64_t>(f.optimizer_index));
    for (size_t k = 0; k < f.params.size(); ++k) {
      const auto [start, n] = shard_overlap(f.offsets[k], f.params[k].numel(), lo, lo + f.shard_numel);
      if (n == 0) continue;
      c10::impl::GenericDict piece(c10::StringType::get(), c10::AnyType::get());
      piece.insert("offset", start - f.offsets[k]);
      piece.insert("model", f.shard.detach().narrow(0, start - lo, n).cpu().clone());
      c10::impl::GenericDict opt(c10::StringType::get(), c10::AnyType::get());
      if (has_state)
        for (const auto& e : state.at(static_cast<int64_t>(f.optimizer_index)).toGenericDict()) {
          const torch::Tensor t = e.value().toTensor();
          opt.insert(e.key(), t.dim() == 0 ? t.cpu().clone() : t.narrow(0, start - lo, n).cpu().clone());
        }
      piece.insert("optimizer", opt);
      out.insert(f.names[k], piece);
    }
  }
  return out;
}

bool FullSharding::load_parameter(const std::string& name, const torch::Tensor& value) {
  const auto it = where_.find(name);
  if (it == where_.end()) return false;
  const Flat& f = flats_[it->second.first];
  const size_t k = it->second.second;
  const int64_t lo = f.begin(rank_);
  const auto [start, n] = shard_overlap(f.offsets[k], f.params[k].numel(), lo, lo + f.shard_numel);
  torch::NoGradGuard no_grad;
  if (n > 0) f.shard.detach().narrow(0, start - lo, n).copy_(value.reshape({-1}).narrow(0, start - f.offsets[k], n));
  return true;
}

void FullSharding::load_optimizer_state(optim::Optimizer& optimizer, const c10::impl::GenericDict& state) const {
  std::map<std::string, int64_t> index_of;
  for (size_t i = 0; i < optimizer_names_.size(); ++i) index_of[optimizer_names_[i]] = static_cast<int64_t>(i);
  c10::impl::GenericDict entries(c10::IntType::get(), c10::AnyType::get());
  for (const auto& f : flats_) {
    if (f.group < 0) continue;
    const int64_t lo = f.begin(rank_);
    std::map<std::string, torch::Tensor> merged;
    for (size_t k = 0; k < f.params.size(); ++k) {
      const auto it = index_of.find(f.names[k]);
      if (it == index_of.end() || !state.contains(it->second)) continue;
      const auto [start, n] = shard_overlap(f.offsets[k], f.params[k].numel(), lo, lo + f.shard_numel);
      for (const auto& e : state.at(it->second).toGenericDict()) {
        const torch::Tensor t = e.value().toTensor();
        torch::Tensor& into = merged[e.key().toStringRef()];
        if (t.dim() == 0) {
          if (!into.defined()) into = t.clone();
          continue;
        }
        if (t.numel() != f.params[k].numel())
          throw std::runtime_error("optimizer state '" + e.key().toStringRef() + "' of " + f.names[k] + " has " +
                                   std::to_string(t.numel()) + " elements, not one per weight (" +
                                   std::to_string(f.params[k].numel()) + "): it cannot be sharded");
        if (!into.defined()) into = torch::zeros({f.shard_numel}, t.options().device(f.shard.device()));
        if (n > 0) into.narrow(0, start - lo, n).copy_(t.reshape({-1}).narrow(0, start - f.offsets[k], n));
      }
    }
    if (merged.empty()) continue;
    c10::impl::GenericDict entry(c10::StringType::get(), c10::AnyType::get());
    for (const auto& [key, t] : merged) entry.insert(key, t);
    entries.insert(static_cast<int64_t>(f.optimizer_index), entry);
  }
  optimizer.keep_state_of({});
  optimizer.add_state(entries);
}

}  // namespace zoo
