// Implementation of models/kernels/weight_copies.h.
#include "models/kernels/weight_copies.h"

#include <torch/torch.h>

#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "models/kernels/torch_version.h"

namespace zoo::models {
namespace {

using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

// dsts[i] = srcs[i] (casting), one multi-tensor launch per few hundred
// chunks on LibTorch 2.2+ CUDA, one copy each elsewhere.
void copy_all(const std::vector<torch::Tensor>& dsts, const std::vector<torch::Tensor>& srcs) {
  if (dsts.empty()) return;
#if ZOO_TORCH_AT_LEAST(2, 2)
  if (dsts.front().is_cuda()) {
    at::_foreach_copy_(dsts, srcs);
    return;
  }
#endif
  for (size_t i = 0; i < dsts.size(); ++i) dsts[i].copy_(srcs[i]);
}

// The rows of `copy` that each part fills, as views.
std::vector<torch::Tensor> row_views(const torch::Tensor& copy, at::TensorList parts) {
  std::vector<torch::Tensor> views;
  int64_t row = 0;
  for (const torch::Tensor& p : parts) {
    views.push_back(copy.narrow(0, row, p.size(0)));
    row += p.size(0);
  }
  return views;
}

void check_parts(at::TensorList parts, const char* what) {
  TORCH_CHECK(!parts.empty(), what, ": no tensors to copy");
  const torch::Tensor& first = parts.front();
  for (const torch::Tensor& p : parts)
    TORCH_CHECK(p.defined() && p.dim() >= 1 && p.sizes().slice(1) == first.sizes().slice(1) &&
                    p.scalar_type() == first.scalar_type() && p.device() == first.device(),
                what, ": parts of one trailing shape, type and device expected; got ", p.sizes(), " beside ",
                first.sizes());
}

struct Key {
  std::vector<const c10::TensorImpl*> parts;
  at::ScalarType type;
  int64_t padding;
  double padding_value;
  bool operator<(const Key& o) const {
    return std::tie(parts, type, padding, padding_value) < std::tie(o.parts, o.type, o.padding, o.padding_value);
  }
};

struct Entry {
  std::vector<WeakImpl> parts;  // weak: the store must not keep a model alive
  std::vector<int64_t> versions;
  std::vector<const void*> storage;
  torch::Tensor copy;

  bool gone() const {
    for (const WeakImpl& p : parts)
      if (p.expired()) return true;
    return false;
  }
  std::vector<torch::Tensor> live_parts() const {
    std::vector<torch::Tensor> out;
    for (const WeakImpl& p : parts) out.emplace_back(p.lock());
    return out;
  }
  bool fresh() const {
    const std::vector<torch::Tensor> now = live_parts();
    for (size_t i = 0; i < now.size(); ++i)
      if (now[i]._version() != versions[i] || now[i].data_ptr() != storage[i]) return false;
    return true;
  }
  void note_state() {
    versions.clear(), storage.clear();
    for (const torch::Tensor& p : live_parts()) versions.push_back(p._version()), storage.push_back(p.data_ptr());
  }
};

struct Store {
  std::mutex mutex;
  std::map<Key, Entry> entries;
  WeightCopyStats stats;

  void forget_gone() {
    for (auto it = entries.begin(); it != entries.end();) it = it->second.gone() ? entries.erase(it) : std::next(it);
  }

  // Every stale copy refreshed, batched by device and types.
  void refresh_stale() {
    forget_gone();
    std::map<std::tuple<std::string, at::ScalarType, at::ScalarType>,
             std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>>>
        batches;
    std::vector<Entry*> refreshed;
    for (auto& [key, entry] : entries) {
      if (entry.fresh()) continue;
      const std::vector<torch::Tensor> parts = entry.live_parts();
      auto& [dsts, srcs] = batches[{parts.front().device().str(), parts.front().scalar_type(), key.type}];
      const std::vector<torch::Tensor> views = row_views(entry.copy, parts);
      for (size_t i = 0; i < parts.size(); ++i) dsts.push_back(views[i]), srcs.push_back(parts[i]);
      refreshed.push_back(&entry);
    }
    torch::NoGradGuard no_grad;
    for (const auto& [types, lists] : batches) copy_all(lists.first, lists.second);
    for (Entry* e : refreshed) e->note_state();
    stats.refreshes += 1;
    stats.refreshed += refreshed.size();
  }
};

Store& store() {
  static Store* s = new Store();  // never destroyed: its GPU tensors outlive CUDA's teardown at exit
  return *s;
}

}  // namespace

at::Tensor stacked_copy(at::TensorList parts, at::ScalarType type, int64_t padding, double padding_value) {
  check_parts(parts, "stacked_copy");
  TORCH_CHECK(padding >= 0, "stacked_copy: padding ", padding, " < 0");
  int64_t rows = 0;
  for (const torch::Tensor& p : parts) rows += p.size(0);
  std::vector<int64_t> shape = parts.front().sizes().vec();
  shape[0] = rows + padding;
  torch::NoGradGuard no_grad;
  torch::Tensor copy = torch::empty(shape, parts.front().options().dtype(type));
  std::vector<torch::Tensor> srcs(parts.begin(), parts.end());
  copy_all(row_views(copy, parts), srcs);
  if (padding > 0) copy.narrow(0, rows, padding).fill_(padding_value);
  return copy;
}

bool weight_copy_applies(at::TensorList parts, at::ScalarType type) {
  if (parts.empty()) return false;
  for (const torch::Tensor& p : parts)
    if (!p.defined() || !p.is_leaf() || !p.is_floating_point() || p.scalar_type() == type ||
        p.scalar_type() != parts.front().scalar_type() || p.device() != parts.front().device())
      return false;
  return true;
}

at::Tensor weight_copy(at::TensorList parts, at::ScalarType type, int64_t padding, double padding_value) {
  TORCH_CHECK(weight_copy_applies(parts, type), "weight_copy: float leaf tensors of one type and device, other than ",
              type, ", expected");
  Key key{{}, type, padding, padding_value};
  for (const torch::Tensor& p : parts) key.parts.push_back(p.unsafeGetTensorImpl());
  Store& s = store();
  const std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.entries.find(key);
  if (it != s.entries.end() && !it->second.gone()) {
    if (!it->second.fresh()) s.refresh_stale();  // keeps this entry: its parts are alive
    return it->second.copy;
  }
  s.forget_gone();
  Entry entry;
  for (const torch::Tensor& p : parts) entry.parts.emplace_back(p.getIntrusivePtr());
  entry.copy = stacked_copy(parts, type, padding, padding_value);
  entry.note_state();
  s.stats.made += 1;
  return s.entries.insert_or_assign(key, std::move(entry)).first->second.copy;
}

WeightCopyStats weight_copy_stats() {
  Store& s = store();
  const std::lock_guard<std::mutex> lock(s.mutex);
  WeightCopyStats out = s.stats;
  out.kept = s.entries.size();
  return out;
}

void forget_weight_copies() {
  Store& s = store();
  const std::lock_guard<std::mutex> lock(s.mutex);
  s.entries.clear();
}

}  // namespace zoo::models
