// Implementation of runner/parallel/full_sharding.h. A unit's parameters of one
// optimizer group, dtype and device make one Flat: a flat buffer of
// world_size equal chunks, of which this rank keeps its chunk (the shard the
// optimizer updates). While gathered, the model's parameters are views of the
// buffer; freeing empties the buffer's storage without touching those views,
// so what autograd saved of them reads the values again once regathered (as
// PyTorch's FSDP does).
#include "runner/parallel/full_sharding.h"

#include <c10/core/StorageImpl.h>
#include <malloc.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>
#include <tuple>

#include "runner/log.h"
#include "runner/parallel/full_sharding_flat.h"
#include "runner/parallel/grad_hooks.h"

namespace zoo {

struct FullSharding::Unit {
  const torch::nn::Module* module = nullptr;  // nullptr: the root
  std::vector<size_t> flats;
  bool gathered = false, frozen_part = false, reduced = false;
  std::function<void()> gathering;     // a gather under way
  int64_t trainable = 0, waiting = 0;  // parameters with gradients, and those still to come this pass
};

struct FullSharding::Pending {
  std::function<void()> wait;
  size_t flat = 0;
  torch::Tensor out;
};

namespace {

void free_storage(const torch::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(c10::DataPtr(nullptr, t.device()));
  s->set_nbytes(0);
}

void allocate_storage(const torch::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
  s->set_data_ptr_noswap(s->allocator()->allocate(bytes));
  s->set_nbytes(bytes);
}

}  // namespace

FullSharding::FullSharding(Distributed& d, torch::nn::Module& model, const std::vector<optim::ParamGroup>& groups)
    : distributed_(d), model_(model), rank_(d.rank()), world_(d.world_size()) {
  units_.emplace_back();  // the root
  std::map<const c10::TensorImpl*, size_t> unit_of_param;
  for (const auto& layer : models::hooked_layers(model)) {
    unit_of_[layer.get()] = units_.size();
    for (const auto& p : layer->parameters()) unit_of_param[p.unsafeGetTensorImpl()] = units_.size();
    units_.emplace_back().module = layer.get();
  }
  std::map<const c10::TensorImpl*, int> group_of;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& p : groups[g].params) group_of[p.unsafeGetTensorImpl()] = static_cast<int>(g);
    optimizer_names_.insert(optimizer_names_.end(), groups[g].names.begin(), groups[g].names.end());
    groups_.push_back(groups[g]);
    groups_.back().params.clear();
  }
  std::map<std::tuple<size_t, int, int, std::string>, size_t> flat_of;
  std::set<const c10::TensorImpl*> seen;  // a parameter registered twice is sharded once
  for (const auto& item : model.named_parameters()) {
    const torch::Tensor& p = item.value();
    const c10::TensorImpl* impl = p.unsafeGetTensorImpl();
    if (!seen.insert(impl).second) continue;
    const size_t u = unit_of_param.count(impl) ? unit_of_param.at(impl) : 0;
    const int g = group_of.count(impl) ? group_of.at(impl) : -1;
    const auto [at, fresh] =
        flat_of.emplace(std::make_tuple(u, g, static_cast<int>(p.scalar_type()), p.device().str()), flats_.size());
    if (fresh) {
      flats_.emplace_back();
      flats_.back().unit = u;
      flats_.back().group = g;
      units_[u].flats.push_back(at->second);
      units_[u].frozen_part |= g < 0;
    }
    Flat& f = flats_[at->second];
    where_[item.key()] = {at->second, f.params.size()};
    f.params.push_back(p);
    f.names.push_back(item.key());
    f.offsets.push_back(f.numel);
    f.numel += p.numel();
  }
  torch::NoGradGuard no_grad;
  group_flats_.resize(groups.size());
  for (size_t i = 0; i < flats_.size(); ++i) {
    Flat& f = flats_[i];
    f.shard_numel = (f.numel + world_ - 1) / world_;
    f.full = torch::zeros({f.shard_numel * world_}, f.params.front().options().requires_grad(false));
    for (size_t k = 0; k < f.params.size(); ++k) {
      f.full.narrow(0, f.offsets[k], f.params[k].numel()).copy_(f.params[k].detach().reshape({-1}));
      f.params[k].set_data(f.full.narrow(0, f.offsets[k], f.params[k].numel()).view(f.params[k].sizes()));
    }
    f.shard = f.full.narrow(0, f.begin(rank_), f.shard_numel).clone();
    free_storage(f.full);
    if (f.group < 0) continue;
    f.shard.set_requires_grad(true);
    group_flats_[static_cast<size_t>(f.group)].push_back(i);
    Unit& unit = units_[f.unit];
    for (const auto& p : f.params) {
      ++unit.trainable;
      if (f.unit == 0) continue;  // the root is reduced when the backward pass has ended
      accumulators_.push_back(after_accumulation(p, [this, u = f.unit, alive = std::weak_ptr<int>(alive_)] {
        if (!alive.lock() || phase_ != Phase::backward) return;
        Unit& unit = units_[u];
        if (unit.reduced || unit.waiting == 0)
          throw std::runtime_error(
              "full sharding: a layer's parameter got a second gradient in one backward pass "
              "after its gradients were reduced; each layer may run once per micro-batch");
        if (--unit.waiting == 0) unit_gradients_done(u);
      }));
    }
  }
  size_t index = 0;
  for (const auto& members : group_flats_)
    for (size_t i : members) flats_[i].optimizer_index = index++;
  models::set_layer_hooks(model_, this);
#ifdef __GLIBC__
  // Memory is what full sharding is for: blocks of 1 MiB and more (gathered
  // weights, gradient buffers) go back to the system when freed, not to the
  // heap that main() keeps for speed, and the whole weights just freed go now.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  malloc_trim(0);
#endif
  const int64_t total =
      std::accumulate(flats_.begin(), flats_.end(), int64_t{0}, [](int64_t s, const Flat& f) { return s + f.numel; });
  log::info(
      strf("Fully sharded over %d ranks: %zu units (%zu layers and the rest), this rank keeps %ld of %ld "
           "parameters",
           world_, units_.size(), units_.size() - 1, static_cast<long>(shard_elements()), static_cast<long>(total)));
}

FullSharding::~FullSharding() { models::set_layer_hooks(model_, nullptr); }

std::vector<optim::ParamGroup> FullSharding::sharded_groups() const {
  std::vector<optim::ParamGroup> out = groups_;
  for (size_t g = 0; g < out.size(); ++g) {
    out[g].names.clear();
    for (size_t i : group_flats_[g]) {
      out[g].params.push_back(flats_[i].shard);
      out[g].names.push_back(flats_[i].names.front() + " (flat shard of " + std::to_string(flats_[i].params.size()) +
                             " parameters)");
    }
  }
  return out;
}

int64_t FullSharding::shard_elements() const {
  int64_t n = 0;
  for (const auto& f : flats_) n += f.shard_numel;
  return n;
}

void FullSharding::prefetch(size_t u) {
  Unit& unit = units_[u];
  if (unit.gathered) return;
  std::vector<std::function<void()>> waits;
  torch::NoGradGuard no_grad;
  for (size_t i : unit.flats) {
    Flat& f = flats_[i];
    allocate_storage(f.full);
    if (world_ == 1) f.full.copy_(f.shard.detach());
    else waits.push_back(distributed_.start_all_gather(f.full, f.shard.detach()));
  }
  unit.gathered = true;
  unit.gathering = [waits] {
    for (const auto& w : waits) w();
  };
}

void FullSharding::gather(size_t u) {
  prefetch(u);
  if (auto wait = std::exchange(units_[u].gathering, nullptr)) wait();
}

void FullSharding::release(size_t u) {
  Unit& unit = units_[u];
  if (!unit.gathered) return;
  if (auto wait = std::exchange(unit.gathering, nullptr)) wait();  // never free what a collective still writes
  for (size_t i : unit.flats) free_storage(flats_[i].full);
  unit.gathered = false;
}

void FullSharding::begin_forward() {
  phase_ = Phase::forward;
  gather(0);
}

void FullSharding::end_forward() {
  for (size_t u = 0; u < units_.size(); ++u) release(u);
  phase_ = Phase::idle;
}

void FullSharding::begin_backward() {
  phase_ = Phase::backward;
  next_reduction_ = 0;
  for (auto& unit : units_) {
    unit.waiting = unit.trainable;
    unit.reduced = false;
  }
}

std::pair<int64_t, int64_t> FullSharding::last_overlap() const {
  return {last_early_reductions_, static_cast<int64_t>(units_.size()) - 1};
}

void FullSharding::end_backward() {
  int64_t early = 0;
  for (size_t u = 1; u < units_.size(); ++u) early += units_[u].reduced;
  last_early_reductions_ = early;
  for (size_t u = units_.size(); u-- > 1;)  // layers whose gradients did not all come (unused parameters)
    if (!units_[u].reduced) reduce(u);
  reduce(0);
  finish_reductions(0);
  end_forward();
}

void FullSharding::before(const torch::nn::Module& layer) {
  const auto it = unit_of_.find(&layer);
  if (it == unit_of_.end()) return;
  const size_t u = it->second;
  if (phase_ == Phase::backward) {
    start_backward_of(u);  // run again by activation checkpointing
    return;
  }
  gather(u);
  if (u + 1 < units_.size()) prefetch(u + 1);
}

void FullSharding::start_backward_of(size_t u) {
  for (size_t w = u + 1; w < units_.size(); ++w)  // the layers after it are done
    if (units_[w].reduced) release(w);
  gather(u);
  if (u > 1) prefetch(u - 1);
}

void FullSharding::after(const torch::nn::Module& layer, std::vector<torch::Tensor>& outputs) {
  const auto it = unit_of_.find(&layer);
  if (it == unit_of_.end()) return;
  const size_t u = it->second;
  if (phase_ == Phase::backward && torch::GradMode::is_enabled()) return;  // recomputed: its backward comes next
  // An output that is one of the layer's own weights (a bias the decoder
  // leaves for the next norm to add) must outlive their release: a copy.
  for (torch::Tensor& t : outputs)
    for (size_t i : units_[u].flats)
      if (t.defined() && t.is_alias_of(flats_[i].full)) t = t.clone();
  if (torch::GradMode::is_enabled()) hook_outputs(u, outputs);
  release(u);
}

void FullSharding::hook_outputs(size_t u, const std::vector<torch::Tensor>& outputs) {
  for (const auto& t : outputs) {
    if (!t.defined() || !t.requires_grad()) continue;
    t.register_hook([this, u, alive = std::weak_ptr<int>(alive_)](const torch::Tensor&) {
      if (alive.lock()) start_backward_of(u);  // this layer's output gradient is whole
    });
  }
}

void FullSharding::unit_gradients_done(size_t) {
  // Layers reduce in backward order, the same on every rank, as c10d needs.
  const size_t layers = units_.size() - 1;
  while (next_reduction_ < layers && units_[layers - next_reduction_].waiting == 0) {
    reduce(layers - next_reduction_);
    ++next_reduction_;
  }
}

void FullSharding::reduce(size_t u) {
  Unit& unit = units_[u];
  if (unit.reduced) return;
  unit.reduced = true;
  torch::NoGradGuard no_grad;
  for (size_t i : unit.flats) {
    Flat& f = flats_[i];
    if (f.group < 0) continue;
    torch::Tensor grad = torch::zeros({f.shard_numel * world_}, f.shard.options().requires_grad(false));
    for (size_t k = 0; k < f.params.size(); ++k) {
      torch::Tensor& g = f.params[k].mutable_grad();
      if (g.defined()) grad.narrow(0, f.offsets[k], f.params[k].numel()).copy_(g.reshape({-1}));
      g = torch::Tensor();
    }
    auto p = std::make_shared<Pending>();
    p->flat = i;
    p->out = torch::empty({f.shard_numel}, grad.options());
    if (world_ == 1) {
      p->out.copy_(grad);
      p->wait = [] {};
    } else {
      p->wait = distributed_.start_reduce_scatter(grad, p->out);
    }
    pending_.push_back(std::move(p));
  }
  // A layer with frozen weights may still need them for its input's
  // gradient: freed once the layer before it starts its backward pass.
  if (u > 0 && !unit.frozen_part) release(u);
  finish_reductions(1);  // one in flight while the backward pass goes on: its buffer's memory bounded
}

void FullSharding::finish_reductions(size_t keep_pending) {
  torch::NoGradGuard no_grad;
  while (pending_.size() > keep_pending) {
    const std::shared_ptr<Pending> p = pending_.front();
    pending_.erase(pending_.begin());
    p->wait();
    torch::Tensor& g = flats_[p->flat].shard.mutable_grad();
    p->out.div_(world_);
    g = g.defined() ? g.add_(p->out) : p->out;  // micro-batches accumulate
  }
}

torch::Tensor FullSharding::clip_coefficient(double max_norm) {
  torch::NoGradGuard no_grad;
  torch::Tensor squares = torch::zeros({1}, flats_.empty() ? torch::TensorOptions().dtype(torch::kDouble)
                                                           : flats_.front().shard.options().dtype(torch::kDouble));
  for (const auto& f : flats_)  // each shard's norm in its own type (no double copy of it), summed in double
    if (f.shard.grad().defined()) squares += f.shard.grad().norm().to(torch::kDouble).pow(2);
  distributed_.sum(squares);
  const torch::Tensor norm = squares.sqrt().to(torch::kFloat).reshape({});
  return optim::clip_coefficient_of_norm(norm, max_norm);
}

bool FullSharding::weights_finite() {
  bool finite = true;
  for (const auto& f : flats_) finite = finite && torch::isfinite(f.shard.detach()).all().item<bool>();
  return distributed_.all_agree(finite);
}

}  // namespace zoo
