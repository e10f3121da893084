// PEFT's LoRA adapter directory (adapter_config.json +
// adapter_model.safetensors, keys base_model.model.<HF module>.lora_A.weight
// and .lora_B.weight) <-> zoo's adapters (<dense layer>.lora_A / .lora_B in
// the model's state dict, lora_params in its params). The HF module names
// and the row order of B come from the converter's tensor map, as the
// weights' do. Defines: AdapterLayer, adapter_layers, merge_adapters,
// write_peft_adapter, PeftImport, read_peft_adapter.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "models/common/lora_config.h"
#include "models/registry.h"

namespace zoo::convert {

struct AdapterLayer {
  std::string path;  // zoo's dense layer, e.g. "transformer_decoder.layers.0.self_attn.proj_q_dense_layer"
  int64_t r = 0;
  double alpha = 0, dropout = 0;
};

// The layers `groups` give adapters in `spec`'s model (built on the meta device).
std::vector<AdapterLayer> adapter_layers(const models::ModelSpec& spec, const std::vector<models::LoraGroup>& groups);

// Folds each layer's (alpha / r) B A into its weight (in float32 or wider,
// back to the weight's dtype) and removes the adapter tensors: the state
// of the model without adapters that computes what the adapted one does.
void merge_adapters(models::StateDict& state, const std::vector<AdapterLayer>& layers);

// Writes dir/adapter_config.json and dir/adapter_model.safetensors for the
// Hugging Face model `converter` exports. `base` goes to
// base_model_name_or_path. Throws std::runtime_error naming a layer PEFT
// cannot hold as zoo does (fused or transposed in HF).
void write_peft_adapter(const std::string& dir, const std::string& converter, const models::ModelSpec& spec,
                        const std::vector<AdapterLayer>& layers, const models::StateDict& state,
                        const std::string& base);

struct PeftImport {
  std::vector<models::LoraGroup> groups;  // lora_params that give exactly the adapter's layers
  models::StateDict tensors;              // <dense layer>.lora_A / .lora_B
};

// Reads a PEFT adapter directory for the base model `spec` (converter: its
// Hugging Face model type). Throws std::runtime_error naming the file and
// key: an adapter whose layers or shapes are not the base's (made for
// another base model), settings zoo's LoRA does not compute (use_rslora,
// DoRA, bias training), or layers that are only some of their kind.
PeftImport read_peft_adapter(const std::string& dir, const std::string& converter, const models::ModelSpec& spec);

}  // namespace zoo::convert
