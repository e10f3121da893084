// A Hugging Face checkpoint layout as data: which HF tensor is which zoo
// tensor, which HF tensors are stored transposed (GPT-2's Conv1D), which are
// q/k/v fused into one, and whether HF keeps the rotary dims half-split.
// Each converter declares its HfKeyMap; map_to_zoo / map_to_hf apply it
// either way, so the two directions cannot disagree. Defines: QkvLayout,
// QkvShape, split_qkv, join_qkv, HfTensor, HfFusedQkv, HfKeyMap, map_to_zoo,
// map_to_hf, key_mapped, map_encoder_layer_linears, zoo_layer, hf_linear_of,
// zoo_linear_of, weight_rows_to_hf, weight_rows_to_zoo.
#pragma once

#include <torch/torch.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/registry.h"

namespace zoo::models {

// How a fused q/k/v tensor orders its rows:
//   kPerGroup: for each key/value group, its queries then its key then its
//     value (GPT-NeoX, BLOOM, Falcon, GPTBigCode: with one group per head
//     that is [q_h; k_h; v_h] per head, with one group [all q; k; v]);
//   kBlocks: all queries, all keys, all values (GPT-2's c_attn, MPT's Wqkv);
//   kCodeGenShards: CodeGen's qkv_proj, saved from 4 model-parallel shards,
//     each [its queries; its values; its keys] for a quarter of the heads.
enum class QkvLayout { kPerGroup, kBlocks, kCodeGenShards };
// CodeGen was trained on TPU v4 with its qkv projection split 4 ways (its mp_num).
constexpr int64_t kCodeGenShards = 4;

struct QkvShape {
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
};

// Rows of a fused (rows, in) weight or (rows) bias <-> zoo's q (heads x
// head_dim rows), k and v (kv_heads x head_dim rows each). `with_q` false:
// a fused [k; v] alone (SantaCoder's kv_attn).
std::vector<torch::Tensor> split_qkv(const torch::Tensor& fused, const QkvShape& s, QkvLayout layout,
                                     bool with_q = true);
torch::Tensor join_qkv(const std::vector<torch::Tensor>& parts, const QkvShape& s, QkvLayout layout);

// One HF tensor and its zoo name. `transposed`: HF stores it (in, out).
// `optional`: absent on both sides is fine (a bias the config turns off;
// the strict load into the built model then checks it against the config).
// `hf_offset`: HF stores the zoo tensor minus this (Gemma's RMSNorm scales
// by 1 + weight); the sum is taken in float32 or wider, so a bfloat16
// checkpoint loses nothing on the way in.
struct HfTensor {
  std::string hf, zoo;
  bool transposed = false;
  bool optional = false;
  double hf_offset = 0.0;
};

// One fused HF tensor and the zoo tensors (q, k, v; or k, v) it holds.
struct HfFusedQkv {
  std::string hf;
  std::vector<std::string> zoo;
  QkvLayout layout = QkvLayout::kPerGroup;
  bool transposed = false;
  bool optional = false;
};

struct HfKeyMap {
  std::vector<HfTensor> tensors;
  std::vector<HfFusedQkv> fused;
  QkvShape qkv;
  // HF rotates its q/k rows as two halves of the first `rotary_dim` dims of
  // each head; zoo (as modelzoo and GPT-J) interleaves them.
  std::optional<int64_t> half_split_rotary_dim;
  // HF buffers rebuilt at load (masks, inv_freq): dropped on import when a key contains one.
  std::vector<std::string> hf_buffers;
  // HF keys that may hold a copy of a tied tensor: dropped on import.
  std::vector<std::string> hf_tied_copies;
  // Import also reads keys saved without this prefix (a base model saved alone).
  std::string hf_prefix;

  // .weight (transposed when `conv1d`) and an optional .bias.
  void linear(const std::string& hf, const std::string& zoo, bool conv1d = false);
  // .weight and an optional .bias: a norm (its weight stored minus `weight_offset`).
  void norm(const std::string& hf, const std::string& zoo, double weight_offset = 0.0);
  void fused_qkv(const std::string& hf, const std::string& zoo_attention, QkvLayout layout, bool conv1d = false);
  // The LM head's weight: HF's `hf` <-> zoo's lm_head.weight, or, tied to
  // the embeddings, a copy HF may hold and zoo does not.
  void lm_head(bool tied, const std::string& hf = "lm_head.weight");
};

// An encoder layer of HF's BERT-style layouts (BERT, RoBERTa, ESM, ViT):
// layer `hf` (e.g. "bert.encoder.layer.3.") <-> zoo's encoder layer `zoo`:
// <self_attention>{query,key,value} (BERT's attention.self., ViT's
// attention.attention.), attention.output.dense, intermediate.dense,
// output.dense; each layout places its norms itself.
void map_encoder_layer_linears(HfKeyMap& m, const std::string& hf, const std::string& zoo,
                               const std::string& self_attention = "attention.self.");

// "transformer_decoder.layers.<i>.": where zoo's decoder layers live.
std::string zoo_layer(int64_t i);

// Apply the map; a tensor the map has no name for, or a required one that is
// missing, is an error naming every such key.
std::map<std::string, torch::Tensor> map_to_zoo(const HfKeyMap& map, const std::map<std::string, torch::Tensor>& hf);
std::map<std::string, torch::Tensor> map_to_hf(const HfKeyMap& map, const std::map<std::string, torch::Tensor>& zoo);

// `a` with from_hf / to_hf applying the map `keys(options)` gives for the
// model's options (`options_of`: the family's typed options of a spec).
template <class Options, class Keys>
HfAdapter key_mapped(HfAdapter a, const Options& (*options_of)(const ModelSpec&), Keys keys) {
  a.from_hf = [options_of, keys](const StateDict& hf, const ModelSpec& m) {
    return map_to_zoo(keys(options_of(m)), hf);
  };
  a.to_hf = [options_of, keys](const StateDict& z, const ModelSpec& m) { return map_to_hf(keys(options_of(m)), z); };
  a.key_map = [options_of, keys](const ModelSpec& m) { return keys(options_of(m)); };
  return a;
}

// The Hugging Face module (its weight's key without ".weight") that holds
// zoo's dense layer `zoo_linear` (a module path, e.g.
// "transformer_decoder.layers.0.self_attn.proj_q_dense_layer"), and back.
// Throws std::runtime_error when HF fuses the layer with others (GPT-2's
// c_attn) or stores it transposed (Conv1D), or has no such layer.
std::string hf_linear_of(const HfKeyMap& map, const std::string& zoo_linear);
std::string zoo_linear_of(const HfKeyMap& map, const std::string& hf_linear);

// A tensor with one row per output of zoo's dense layer `zoo_linear` (a
// LoRA B), its rows ordered as HF orders that layer's weight rows (the
// half-split rotary of q and k), and back.
torch::Tensor weight_rows_to_hf(const HfKeyMap& map, const std::string& zoo_linear, const torch::Tensor& t);
torch::Tensor weight_rows_to_zoo(const HfKeyMap& map, const std::string& zoo_linear, const torch::Tensor& t);

}  // namespace zoo::models
