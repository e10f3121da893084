// Converters for Hugging Face's base model classes (GPT2Model, LlamaModel,
// BertModel, ...: what AutoModel loads), modelzoo's `<name>-headless`: the
// same layers as the full model's converter, saved without the base
// prefix (transformer., model., bert.) and without the head. zoo's model
// keeps its head: on import the head is initialized as the model
// initializes it (modelzoo's converters do the same), on export it is
// dropped. Defines: HeadlessParts, base_architecture, headless_adapter,
// add_headless_converters, decoder_lm_head_parts, built_head_parts.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "models/common/decoder_lm_fields.h"
#include "models/registry.h"

namespace zoo::models {

struct HeadlessParts {
  std::vector<std::string> zoo_head;  // prefixes of the zoo tensors HF's base model lacks ("lm_head.")
  // Adds those tensors, initialized as the model initializes them.
  std::function<void(StateDict& zoo, const ModelSpec& model)> initialize_head;
  // Optional: the full converter's, for a checkpoint without the head (BERT: its pooler says whether the model
  // keeps the next-sentence head).
  std::function<void(YAML::Node& model, const StateDict& hf)> config_from_weights;
};

// "LlamaForCausalLM" -> "LlamaModel", "GPT2LMHeadModel" -> "GPT2Model", "BertForPreTraining" -> "BertModel".
std::string base_architecture(const std::string& architecture);

HfAdapter headless_adapter(const HfAdapter& full, const HeadlessParts& parts);

// f.hf[<name>-headless] for each of `names`.
void add_headless_converters(ModelFamily& f, const std::vector<std::string>& names, const HeadlessParts& parts);

// A decoder LM's head (lm_head.weight unless tied, lm_head.bias with use_bias_in_output), initialized as
// Gpt2Model::reset_parameters does; `options_of` gives the family's options of a spec.
HeadlessParts decoder_lm_head_parts(std::function<const DecoderLmOptions&(const ModelSpec&)> options_of);
// The heads under `zoo_head`, taken from the model built and initialized on the CPU (a whole second model:
// for encoders of BERT's size).
HeadlessParts built_head_parts(std::vector<std::string> zoo_head);

}  // namespace zoo::models
