// Implementation of models/hf/hf_key_map.h.
#include "models/hf/hf_key_map.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "models/hf/hf_keys.h"

namespace zoo::models {
namespace {

using StateDict = std::map<std::string, torch::Tensor>;

std::vector<int64_t> with_rows(int64_t rows, const torch::Tensor& like) {
  std::vector<int64_t> shape{rows};
  for (int64_t d = 1; d < like.dim(); ++d) shape.push_back(like.size(d));
  return shape;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// `t` re-ordered as `heads` heads of the config's head_dim rows each, after
// checking that it has exactly those rows (a config.json whose head counts
// do not match the tensors is refused here, before any index is built).
torch::Tensor permute_heads(const HfKeyMap& map, const std::string& zoo_name, const torch::Tensor& t, int64_t heads,
                            const std::string& heads_key, bool to_zoo) {
  const int64_t head_dim = map.qkv.head_dim, rotary_dim = *map.half_split_rotary_dim;
  if (t.dim() < 1 || heads <= 0 || head_dim <= 0 || t.size(0) != heads * head_dim)
    throw std::runtime_error(zoo_name + ": a tensor of shape " + c10::str(t.sizes()) + " where config.json's " +
                             heads_key + " (" + std::to_string(heads) + ") x head_dim (" + std::to_string(head_dim) +
                             ") = " + std::to_string(heads * head_dim) +
                             " rows were expected; the config does not describe these weights");
  if (rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > head_dim)
    throw std::runtime_error(zoo_name + ": a rotary dimension of " + std::to_string(rotary_dim) +
                             " where an even number of at most head_dim (" + std::to_string(head_dim) +
                             ") was expected (config.json's partial_rotary_factor or rotary_dim)");
  return permute_rotary(t, heads, rotary_dim, to_zoo);
}

// zoo's q and k rows interleave the rotary dims; HF's half-split them.
torch::Tensor rotary_rows(const HfKeyMap& map, const std::string& zoo_name, const torch::Tensor& t, bool to_zoo) {
  if (!map.half_split_rotary_dim) return t;
  for (const char* p : {"weight", "bias"}) {
    if (ends_with(zoo_name, std::string("self_attn.proj_q_dense_layer.") + p))
      return permute_heads(map, zoo_name, t, map.qkv.heads, "num_attention_heads", to_zoo);
    if (ends_with(zoo_name, std::string("self_attn.proj_k_dense_layer.") + p))
      return permute_heads(map, zoo_name, t, map.qkv.kv_heads, "num_key_value_heads", to_zoo);
    // A per-head q/k norm scales the dims the rotary re-orders: one head's worth.
    if (ends_with(zoo_name, std::string("self_attn.q_norm.") + p) ||
        ends_with(zoo_name, std::string("self_attn.k_norm.") + p))
      return permute_heads(map, zoo_name, t, 1, "one head", to_zoo);
  }
  return t;
}

// `t` plus `offset`, in float32 or wider.
torch::Tensor add_offset(const torch::Tensor& t, double offset) {
  if (offset == 0.0) return t;
  return t.to(torch::promote_types(t.scalar_type(), torch::kFloat)) + offset;
}

// One error naming every missing and every left-over key.
void throw_if_mismatched(const std::vector<std::string>& missing, const StateDict& rest,
                         const std::string& missing_what, const std::string& rest_what) {
  std::string message;
  auto list = [&](const std::string& what, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    message += (message.empty() ? "" : "; ") + what + ":";
    for (size_t i = 0; i < keys.size(); ++i) message += (i ? ", " : " ") + keys[i];
  };
  std::vector<std::string> left;
  for (const auto& [k, t] : rest) left.push_back(k);
  list(missing_what, missing);
  list(rest_what, left);
  if (!message.empty()) throw std::runtime_error(message);
}

}  // namespace

std::vector<torch::Tensor> split_qkv(const torch::Tensor& fused, const QkvShape& s, QkvLayout layout, bool with_q) {
  const int64_t H = s.heads, G = s.kv_heads, D = s.head_dim, per_group = with_q ? H / G : 0;
  const int64_t rows = (with_q ? H * D : 0) + 2 * G * D;
  if (fused.dim() < 1 || fused.size(0) != rows)
    throw std::runtime_error("a fused q/k/v tensor of shape " + c10::str(fused.sizes()) + " where " +
                             std::to_string(rows) + " rows were expected (" + std::to_string(H) + " query heads, " +
                             std::to_string(G) + " key/value heads of " + std::to_string(D) + ")");
  std::vector<torch::Tensor> parts;
  if (layout == QkvLayout::kCodeGenShards) {
    if (!with_q || G != H || H % kCodeGenShards != 0)
      throw std::runtime_error("CodeGen's fused qkv_proj needs multi-head attention with a multiple of " +
                               std::to_string(kCodeGenShards) + " heads (" + std::to_string(H) + " query heads, " +
                               std::to_string(G) + " key/value heads)");
    std::vector<int64_t> shards{kCodeGenShards, 3, H * D / kCodeGenShards};
    for (int64_t d = 1; d < fused.dim(); ++d) shards.push_back(fused.size(d));
    torch::Tensor g = fused.reshape(shards);
    for (int64_t j : {0, 2, 1})
      parts.push_back(g.select(1, j).reshape(with_rows(H * D, fused)).contiguous());  // q, k, v
    return parts;
  }
  if (layout == QkvLayout::kBlocks) {
    std::vector<int64_t> sizes;
    if (with_q) sizes.push_back(H * D);
    sizes.insert(sizes.end(), {G * D, G * D});
    for (const auto& p : fused.split_with_sizes(sizes, 0)) parts.push_back(p.contiguous());
    return parts;
  }
  std::vector<int64_t> grouped{G, per_group + 2, D};
  for (int64_t d = 1; d < fused.dim(); ++d) grouped.push_back(fused.size(d));
  torch::Tensor g = fused.reshape(grouped);
  using torch::indexing::Slice;
  if (with_q) parts.push_back(g.index({Slice(), Slice(0, per_group)}).reshape(with_rows(H * D, fused)).contiguous());
  for (int64_t j : {per_group, per_group + 1})
    parts.push_back(g.select(1, j).reshape(with_rows(G * D, fused)).contiguous());
  return parts;
}

torch::Tensor join_qkv(const std::vector<torch::Tensor>& parts, const QkvShape& s, QkvLayout layout) {
  const int64_t G = s.kv_heads, D = s.head_dim;
  const bool with_q = parts.size() == 3;
  const torch::Tensor& first = parts.front();
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.size(0);
  if (layout == QkvLayout::kBlocks) return torch::cat(parts, 0).contiguous();
  if (layout == QkvLayout::kCodeGenShards) {
    std::vector<int64_t> shard{kCodeGenShards, first.size(0) / kCodeGenShards};
    for (int64_t d = 1; d < first.dim(); ++d) shard.push_back(first.size(d));
    return torch::stack({parts[0].reshape(shard), parts[2].reshape(shard), parts[1].reshape(shard)}, 1)  // q, v, k
        .reshape(with_rows(rows, first))
        .contiguous();
  }
  std::vector<torch::Tensor> grouped;
  for (size_t j = 0; j < parts.size(); ++j) {
    std::vector<int64_t> shape{G, (with_q && j == 0) ? s.heads / G : 1, D};
    for (int64_t d = 1; d < first.dim(); ++d) shape.push_back(first.size(d));
    grouped.push_back(parts[j].reshape(shape));
  }
  return torch::cat(grouped, 1).reshape(with_rows(rows, first)).contiguous();
}

std::string hf_linear_of(const HfKeyMap& map, const std::string& zoo_linear) {
  const std::string weight = zoo_linear + ".weight";
  for (const HfFusedQkv& f : map.fused)
    if (std::find(f.zoo.begin(), f.zoo.end(), weight) != f.zoo.end())
      throw std::runtime_error(zoo_linear + ": Hugging Face holds it fused with others in " + f.hf +
                               ", so its adapter has no layer of its own there");
  for (const HfTensor& t : map.tensors) {
    if (t.zoo != weight) continue;
    if (t.transposed)
      throw std::runtime_error(zoo_linear + ": Hugging Face stores its weight transposed (" + t.hf +
                               ", a Conv1D), which PEFT's LoRA layers do not take as zoo's");
    return t.hf.substr(0, t.hf.size() - std::string(".weight").size());
  }
  throw std::runtime_error(zoo_linear + ": not a layer of the Hugging Face model");
}

std::string zoo_linear_of(const HfKeyMap& map, const std::string& hf_linear) {
  for (const HfTensor& t : map.tensors)
    if (t.hf == hf_linear + ".weight" || (!map.hf_prefix.empty() && t.hf == map.hf_prefix + hf_linear + ".weight"))
      return t.zoo.substr(0, t.zoo.size() - std::string(".weight").size());
  throw std::runtime_error(hf_linear + ": not a dense layer of this model");
}

torch::Tensor weight_rows_to_hf(const HfKeyMap& map, const std::string& zoo_linear, const torch::Tensor& t) {
  return rotary_rows(map, zoo_linear + ".weight", t, /*to_zoo=*/false);
}

torch::Tensor weight_rows_to_zoo(const HfKeyMap& map, const std::string& zoo_linear, const torch::Tensor& t) {
  return rotary_rows(map, zoo_linear + ".weight", t, /*to_zoo=*/true);
}

void HfKeyMap::linear(const std::string& hf, const std::string& zoo, bool conv1d) {
  tensors.push_back({hf + ".weight", zoo + ".weight", conv1d, false});
  tensors.push_back({hf + ".bias", zoo + ".bias", false, true});
}

void HfKeyMap::norm(const std::string& hf, const std::string& zoo, double weight_offset) {
  tensors.push_back({hf + ".weight", zoo + ".weight", false, false, weight_offset});
  tensors.push_back({hf + ".bias", zoo + ".bias", false, true});
}

void HfKeyMap::fused_qkv(const std::string& hf, const std::string& zoo_attention, QkvLayout layout, bool conv1d) {
  for (const char* p : {".weight", ".bias"}) {
    std::vector<std::string> parts;
    for (const char* n : {"q", "k", "v"}) parts.push_back(zoo_attention + "proj_" + n + "_dense_layer" + p);
    fused.push_back({hf + p, parts, layout, conv1d && std::string(p) == ".weight", std::string(p) == ".bias"});
  }
}

void HfKeyMap::lm_head(bool tied, const std::string& hf) {
  if (tied) hf_tied_copies.push_back(hf);
  else tensors.push_back({hf, "lm_head.weight"});
}

std::string zoo_layer(int64_t i) { return "transformer_decoder.layers." + std::to_string(i) + "."; }

StateDict map_to_zoo(const HfKeyMap& map, const StateDict& hf) {
  std::set<std::string> known;
  for (const auto& t : map.tensors) known.insert(t.hf);
  for (const auto& f : map.fused) known.insert(f.hf);
  StateDict rest, out;
  for (const auto& [key, t] : hf) {
    bool buffer = false;
    for (const auto& b : map.hf_buffers) buffer = buffer || key.find(b) != std::string::npos;
    if (buffer) continue;
    const bool unprefixed = !map.hf_prefix.empty() && !known.count(key) && known.count(map.hf_prefix + key);
    rest[unprefixed ? map.hf_prefix + key : key] = t;
  }
  for (const auto& k : map.hf_tied_copies) rest.erase(k);
  std::vector<std::string> missing;
  for (const auto& e : map.tensors) {
    if (!rest.count(e.hf)) {
      if (!e.optional) missing.push_back(e.hf);
      continue;
    }
    torch::Tensor t = add_offset(take_key(rest, e.hf), e.hf_offset);
    if (e.transposed) t = t.t();
    out[e.zoo] = rotary_rows(map, e.zoo, t, true).contiguous();
  }
  for (const auto& f : map.fused) {
    if (!rest.count(f.hf)) {
      if (!f.optional) missing.push_back(f.hf);
      continue;
    }
    torch::Tensor t = take_key(rest, f.hf);
    std::vector<torch::Tensor> parts;
    try {
      parts = split_qkv(f.transposed ? t.t() : t, map.qkv, f.layout, f.zoo.size() == 3);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(f.hf + ": " + e.what());
    }
    for (size_t j = 0; j < parts.size(); ++j) out[f.zoo[j]] = rotary_rows(map, f.zoo[j], parts[j], true).contiguous();
  }
  throw_if_mismatched(missing, rest, "missing Hugging Face keys", "unexpected Hugging Face keys");
  return out;
}

StateDict map_to_hf(const HfKeyMap& map, const StateDict& zoo) {
  StateDict rest = zoo, out;
  std::vector<std::string> missing;
  for (const auto& e : map.tensors) {
    if (!rest.count(e.zoo)) {
      if (!e.optional) missing.push_back(e.zoo);
      continue;
    }
    torch::Tensor t = take_key(rest, e.zoo);
    t = rotary_rows(map, e.zoo, add_offset(t, -e.hf_offset).to(t.scalar_type()), false);  // in the checkpoint's dtype
    out[e.hf] = (e.transposed ? t.t() : t).contiguous();
  }
  for (const auto& f : map.fused) {
    std::vector<torch::Tensor> parts;
    for (const auto& z : f.zoo)
      if (rest.count(z)) parts.push_back(rotary_rows(map, z, take_key(rest, z), false));
    if (parts.empty() && f.optional) continue;
    if (parts.size() != f.zoo.size()) {
      missing.push_back(f.zoo.front());
      continue;
    }
    torch::Tensor t = join_qkv(parts, map.qkv, f.layout);
    out[f.hf] = (f.transposed ? t.t() : t).contiguous();
  }
  throw_if_mismatched(missing, rest, "zoo keys missing from the checkpoint", "zoo keys with no Hugging Face name");
  return out;
}

void map_encoder_layer_linears(HfKeyMap& m, const std::string& h, const std::string& z,
                               const std::string& self_attention) {
  m.linear(h + self_attention + "query", z + "self_attn.proj_q_dense_layer");
  m.linear(h + self_attention + "key", z + "self_attn.proj_k_dense_layer");
  m.linear(h + self_attention + "value", z + "self_attn.proj_v_dense_layer");
  m.linear(h + "attention.output.dense", z + "self_attn.proj_output_dense_layer");
  m.linear(h + "intermediate.dense", z + "ffn.ffn.0.linear_layer");
  m.linear(h + "output.dense", z + "ffn.ffn.1.linear_layer");
}

}  // namespace zoo::models
