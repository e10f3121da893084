// Implementation of runner/checkpoint/sharded_checkpoint.h.
#include "runner/checkpoint/sharded_checkpoint.h"

#include <filesystem>
#include <map>
#include <stdexcept>

#include "runner/checkpoint/checkpoint.h"

namespace zoo::ckpt {

std::string shards_dir(const std::string& index_path) { return index_path + ".shards"; }

std::string shard_path(const std::string& index_path, int rank, int world_size) {
  return shards_dir(index_path) + "/shard_" + std::to_string(rank) + "_of_" + std::to_string(world_size) + ".mdl";
}

void save_shard(const std::string& index_path, int rank, int world_size, const std::string& id,
                const c10::impl::GenericDict& pieces) {
  c10::impl::GenericDict about(c10::StringType::get(), c10::AnyType::get());
  about.insert("id", id);
  about.insert("rank", int64_t{rank});
  c10::impl::GenericDict shard(c10::StringType::get(), c10::AnyType::get());
  shard.insert("pieces", pieces);
  shard.insert("__shard__", about);
  std::filesystem::create_directories(shards_dir(index_path));
  save_checkpoint_file(shard_path(index_path, rank, world_size), shard);
}

void save_sharded_index(const std::string& index_path, const ShardedIndex& index, const torch::nn::Module& model,
                        const c10::impl::GenericDict& run_state) {
  c10::impl::GenericDict info(c10::StringType::get(), c10::AnyType::get());
  info.insert("id", index.id);
  info.insert("world_size", int64_t{index.world_size});
  c10::impl::GenericDict shapes(c10::StringType::get(), c10::AnyType::get());
  for (const auto& [name, sizes] : index.shapes) shapes.insert(name, c10::List<int64_t>(sizes));
  info.insert("shapes", shapes);
  c10::impl::GenericDict param_keys(c10::StringType::get(), c10::StringType::get());
  c10::impl::GenericDict buffers(c10::StringType::get(), c10::TensorType::get());
  std::map<std::string, torch::Tensor> buffer_of;
  for (const auto& b : model.named_buffers()) buffer_of[b.key()] = b.value().detach().cpu();
  for (const auto& [key, name] : model_state_names(model)) {
    if (buffer_of.count(name)) buffers.insert(key, buffer_of.at(name));
    else param_keys.insert(key, name);
  }
  info.insert("param_keys", param_keys);
  info.insert("optimizer_names", c10::List<std::string>(index.optimizer_names));
  info.insert("optimizer_param_groups", index.optimizer_param_groups);
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("model", buffers);
  for (const auto& kv : run_state) d.insert(kv.key(), kv.value());
  d.insert("__sharded__", info);
  save_checkpoint_file(index_path, d);
}

namespace {

// A tensor of `numel` elements filled piece by piece.
struct Assembled {
  torch::Tensor values;
  int64_t filled = 0;
  void add(const torch::Tensor& piece, int64_t offset, int64_t numel) {
    if (!values.defined()) values = torch::zeros({numel}, piece.options());
    values.narrow(0, offset, piece.numel()).copy_(piece.reshape({-1}));
    filled += piece.numel();
  }
};

std::vector<int64_t> sizes_of(const c10::IValue& v) { return v.toIntVector(); }

int64_t numel_of(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

}  // namespace

c10::impl::GenericDict assemble_sharded(const c10::impl::GenericDict& index, const std::string& index_path) {
  const c10::impl::GenericDict info = index.at("__sharded__").toGenericDict();
  const std::string id = info.at("id").toStringRef();
  const int world = static_cast<int>(info.at("world_size").toInt());
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& kv : info.at("shapes").toGenericDict()) shapes[kv.key().toStringRef()] = sizes_of(kv.value());
  std::map<std::string, Assembled> weights;
  std::map<std::string, std::map<std::string, Assembled>> states;
  std::map<std::string, std::map<std::string, torch::Tensor>> scalars;
  for (int r = 0; r < world; ++r) {
    const std::string path = shard_path(index_path, r, world);
    if (!std::filesystem::exists(path))
      throw std::runtime_error(index_path + ": its shard " + path + " is missing; a sharded checkpoint needs all " +
                               std::to_string(world) + " of them");
    const c10::impl::GenericDict shard = load_checkpoint_file(path);
    if (!shard.contains("__shard__") || shard.at("__shard__").toGenericDict().at("id").toStringRef() != id)
      throw std::runtime_error(path + ": not a shard of " + index_path + " (written by another save)");
    for (const auto& kv : shard.at("pieces").toGenericDict()) {
      const std::string name = kv.key().toStringRef();
      if (!shapes.count(name)) throw std::runtime_error(path + ": holds " + name + ", which the index does not list");
      const int64_t numel = numel_of(shapes.at(name));
      const c10::impl::GenericDict piece = kv.value().toGenericDict();
      const int64_t offset = piece.at("offset").toInt();
      const torch::Tensor values = piece.at("model").toTensor();
      if (offset < 0 || offset + values.numel() > numel)
        throw std::runtime_error(path + ": its piece of " + name + " lies outside the parameter");
      weights[name].add(values, offset, numel);
      for (const auto& e : piece.at("optimizer").toGenericDict()) {
        const torch::Tensor t = e.value().toTensor();
        if (t.dim() == 0) scalars[name].emplace(e.key().toStringRef(), t);
        else states[name][e.key().toStringRef()].add(t, offset, numel);
      }
    }
  }
  c10::impl::GenericDict model = index.at("model").toGenericDict().copy();  // the buffers
  for (const auto& kv : info.at("param_keys").toGenericDict()) {
    const std::string name = kv.value().toStringRef();
    const auto& shape = shapes.at(name);
    const auto it = weights.find(name);
    if (it == weights.end() || it->second.filled != numel_of(shape))
      throw std::runtime_error(index_path + ": its shards do not hold all of " + name);
    model.insert(kv.key(), it->second.values.view(shape));
  }
  c10::impl::GenericDict state(c10::IntType::get(), c10::AnyType::get());
  const auto names = info.at("optimizer_names").toListRef();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string name = names[i].toStringRef();
    c10::impl::GenericDict entry(c10::StringType::get(), c10::AnyType::get());
    for (const auto& [key, t] : scalars[name]) entry.insert(key, t);
    for (auto& [key, a] : states[name]) {
      if (a.filled != numel_of(shapes.at(name)))
        throw std::runtime_error(index_path + ": its shards do not hold all of the optimizer's " + key + " of " + name);
      entry.insert(key, a.values.view(shapes.at(name)));
    }
    if (entry.size() > 0) state.insert(static_cast<int64_t>(i), entry);
  }
  c10::impl::GenericDict optimizer(c10::StringType::get(), c10::AnyType::get());
  optimizer.insert("state", state);
  optimizer.insert("param_groups", info.at("optimizer_param_groups"));
  c10::impl::GenericDict out = index.copy();
  out.erase("__sharded__");
  out.insert_or_assign("model", model);
  out.insert_or_assign("optimizer", optimizer);
  return out;
}

}  // namespace zoo::ckpt
