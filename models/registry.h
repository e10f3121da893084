// Model families register here by name; the runner builds models only through
// this registry and never includes a family's header. A family parses its
// `model` section once into a ModelSpec: typed, frozen options that build the
// module, write themselves back to YAML and name the features they consume.
// Defines: StateDict, ModelSpec, TypedModelSpec, HfAdapter, ModelFamily,
// make_model_family, find_model, model_families.
#pragma once

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "configs/schema/schema.h"
#include "models/model.h"

namespace zoo::models {

using StateDict = std::map<std::string, torch::Tensor>;

class ModelSpec {
 public:
  virtual ~ModelSpec() = default;
  // Every option resolved (defaults filled), without the family name.
  virtual YAML::Node to_yaml() const = 0;
  // The model with parameters created with `param_options` (the meta device
  // inspects a model without allocating it) and initialized.
  virtual std::shared_ptr<Model> build(const torch::TensorOptions& param_options) const = 0;
  // The model with its tensors allocated but not initialized, for a caller
  // that fills every one of them itself (DPO's reference, a copy of its
  // policy); families without a cheaper path initialize anyway.
  virtual std::shared_ptr<Model> build_uninitialized(const torch::TensorOptions& param_options) const {
    return build(param_options);
  }
  // Batch features forward() reads, e.g. input_ids, attention_mask, labels.
  virtual std::vector<std::string> consumes() const = 0;
  // Features forward() reads when the batch has them: kPackedSequenceFeatures
  // for a model that attends within each sequence of a packed row.
  virtual std::vector<std::string> reads_if_present() const { return {}; }
  // The longest sequence the model takes (its max_position_embeddings), if
  // it has such a limit: inputs are checked against it before anything runs.
  virtual std::optional<int64_t> max_sequence_length() const { return std::nullopt; }
  // A model trained inside this one and exported on its own (DPO's policy):
  // its spec and the prefix of its keys in this model's state dict; unset
  // for the rest. `zoo convert` exports it.
  struct Part {
    std::shared_ptr<const ModelSpec> spec;
    std::string key_prefix;
  };
  virtual std::optional<Part> exported_part() const { return std::nullopt; }
  const config::Origin& origin() const { return origin_; }

 protected:
  config::Origin origin_;
};

// A family's spec: its options struct (with `static const config::Schema<Options>& schema()`)
// and its module (constructible from (Options, torch::TensorOptions)).
template <class Options, class ModelT>
class TypedModelSpec : public ModelSpec {
 public:
  TypedModelSpec(const YAML::Node& section, const config::Context& ctx, std::vector<std::string> consumes,
                 std::vector<std::string> reads_if_present = {})
      : consumes_(std::move(consumes)), reads_if_present_(std::move(reads_if_present)) {
    options_ = Options::schema().parse(section, ctx, nullptr, &origin_);
  }
  const Options& options() const { return options_; }
  YAML::Node to_yaml() const override { return Options::schema().to_yaml(options_); }
  std::shared_ptr<Model> build(const torch::TensorOptions& p) const override {
    auto model = std::make_shared<ModelT>(options_, p);
    model->reset_parameters();
    return model;
  }
  std::shared_ptr<Model> build_uninitialized(const torch::TensorOptions& p) const override {
    return std::make_shared<ModelT>(options_, p);
  }
  std::vector<std::string> consumes() const override { return consumes_; }
  std::vector<std::string> reads_if_present() const override { return reads_if_present_; }
  std::optional<int64_t> max_sequence_length() const override {
    if constexpr (config::has_max_position_embeddings<Options>::value) return options_.max_position_embeddings;
    return std::nullopt;
  }

 private:
  Options options_;
  std::vector<std::string> consumes_, reads_if_present_;
};

// The options of `model` when it is a `Spec` (a family's TypedModelSpec, or
// a class deriving from one); std::invalid_argument(`otherwise`) when not.
template <class Spec>
const auto& spec_options(const ModelSpec& model, const std::string& otherwise) {
  const auto* typed = dynamic_cast<const Spec*>(&model);
  if (!typed) throw std::invalid_argument(otherwise);
  return typed->options();
}

// Conversion between a family and its Hugging Face counterpart (torchtitan's
// state_dict_adapter): config.json <-> `model` section, and state dicts
// without the "model." prefix. Functions throw std::runtime_error listing
// missing or unexpected keys.
struct HfKeyMap;  // models/hf/hf_key_map.h

struct HfAdapter {
  // For `zoo convert --list`, when the model types alone do not say (a headless converter).
  std::string description;
  // Hugging Face's base model without its head (models/hf/headless.h): chosen for a config.json that names a
  // base class, never as the one type a zoo model exports to without --model.
  bool headless = false;
  // The `model` section of zoo's params (written to a params file).
  std::function<YAML::Node(const nlohmann::json& config)> config_from_hf;
  std::function<nlohmann::json(const ModelSpec& model)> config_to_hf;
  std::function<StateDict(const StateDict& hf, const ModelSpec& model)> from_hf;
  std::function<StateDict(const StateDict& zoo, const ModelSpec& model)> to_hf;
  // config.json's model_type values this converter reads, and (optional) a
  // finer test when several converters read one (SantaCoder is a "gpt2").
  std::vector<std::string> model_types;
  std::function<bool(const nlohmann::json& config)> claims;
  // Optional: `optimizer` keys the model's math implies (BTLM's muP width).
  std::function<YAML::Node(const nlohmann::json& config)> optimizer_from_hf;
  // Optional: completes the `model` section from the checkpoint's tensors
  // (what config.json leaves open: BERT with or without its NSP head).
  std::function<void(YAML::Node& model, const StateDict& hf)> config_from_weights;
  // Optional: the train/eval input section the converted params start from
  // (data_dir and batch_size are added); unset: GPT-style HDF5 token data.
  std::function<YAML::Node(const nlohmann::json& config, const YAML::Node& model, const std::string& hf_dir)>
      input_from_hf;
  // Optional: a model Hugging Face keeps as several checkpoints, one per
  // sub-directory of the converted directory (DPR's question and context
  // encoders): each sub-directory's name and the prefix of its tensors'
  // keys. config_from_hf then reads, and config_to_hf writes, one object
  // of the sub-directories' config.json files by name; from_hf / to_hf see
  // all their tensors in one state dict.
  struct Component {
    std::string dir, key_prefix;
  };
  std::vector<Component> components;
  // Optional: label names -> class ids (a token classifier's id2label),
  // written beside the params as label_vocab.json, which the model's and the
  // input's label_vocab_file then name.
  std::function<nlohmann::json(const nlohmann::json& config)> label_vocab_from_hf;
  // Set by key_mapped: the tensor map from_hf / to_hf apply, for what maps
  // layer by layer beside the weights (PEFT adapters: runner/convert/peft.h).
  std::function<HfKeyMap(const ModelSpec& model)> key_map;
};

struct ModelFamily {
  std::string name;
  std::vector<std::string> aliases;
  std::string doc;
  // Reads a `model` section (without `name` and the precision keys); throws
  // config::ConfigError naming file, line and key.
  std::function<std::shared_ptr<const ModelSpec>(const YAML::Node&, const config::Context&)> parse;
  std::vector<std::string> consumes;          // batch features, for --help-config
  std::vector<std::string> reads_if_present;  // ... and those it reads when a batch has them
  std::vector<config::FieldInfo> fields;
  // Whether its `model` section takes this key (see Schema::accepts_key).
  std::function<bool(const std::string&)> accepts_key;
  // Keys its section must have (a fine-tuning head's num_labels): a legacy
  // file without them is not this family's.
  std::vector<std::string> required_keys;
  // The data processor of input sections that name none (modelzoo's
  // fc_mnist/run.py chooses its loader itself); "" when they must name one.
  std::string default_data_processor;
  // Keys an input section takes from the model when it lacks them: the
  // input key, and the model keys it is read from, the first the model
  // section has ("vae.scaling_factor": a key of a nested mapping). modelzoo's
  // NER data reads the model's label_vocab_file, DiT's its latent shape.
  // must_agree: an input that gives the key too must give the model's value
  // (modelzoo's DiT data config checks them so).
  struct InputKeyFromModel {
    std::string input_key;
    std::vector<std::string> model_keys;
    bool must_agree = false;
  };
  std::vector<InputKeyFromModel> input_keys_from_model;
  // Model keys it takes from train_input (else eval_input) when the model
  // section lacks them, as (model key, input key): modelzoo's T5 set_defaults
  // sizes its positions by src_max_sequence_length.
  std::vector<std::pair<std::string, std::string>> model_keys_from_input;
  // Hugging Face converters by modelzoo's converter name (e.g. "gpt2", "llama", "gpt-neox").
  std::map<std::string, HfAdapter> hf;
};

template <class Options, class ModelT>
ModelFamily make_model_family(std::string name, std::vector<std::string> aliases, std::string doc,
                              std::vector<std::string> consumes, std::vector<std::string> reads_if_present = {}) {
  ModelFamily f;
  f.name = std::move(name);
  f.aliases = std::move(aliases);
  f.doc = std::move(doc);
  f.consumes = consumes;
  f.reads_if_present = reads_if_present;
  f.parse = [consumes, reads_if_present](const YAML::Node& section, const config::Context& ctx) {
    return std::make_shared<const TypedModelSpec<Options, ModelT>>(section, ctx, consumes, reads_if_present);
  };
  f.fields = Options::schema().describe();
  f.accepts_key = [](const std::string& key) { return Options::schema().accepts_key(key); };
  return f;
}

// Throws std::invalid_argument naming the known families.
const ModelFamily& find_model(const std::string& name);
// For one of modelzoo's model names that zoo does not build (dino, resnet,
// ...): the message saying so, as find_model throws it; nullopt otherwise.
std::optional<std::string> unbuilt_model_name(const std::string& name);
// For a `model` section without a name: the first of `keys` that only a
// modelzoo model zoo does not build has (BERT's pooler_nonlinearity, T5's
// d_kv, ...), with a message saying so; nullopt when none.
std::optional<std::pair<std::string, std::string>> unbuilt_model_key(const std::vector<std::string>& keys);
// The family for a `model` section without `name` (modelzoo picks it by which
// run.py starts the run): gpt2 when it takes every key, else the one family
// that takes them all and finds its required keys among them (a
// GPT-J/NeoX/Falcon config carries use_untied_layer_norm or
// residual_dropout_rate, a BERT one encoder_nonlinearity, its classifier
// num_labels); nullptr when none or several do.
const ModelFamily* family_taking_keys(const std::vector<std::string>& keys);
std::vector<const ModelFamily*> model_families();

// The Hugging Face converter named `name` (`zoo convert --model`), or by
// one of modelzoo's aliases for it (code-llama: llama); an error listing
// every converter when none is.
const HfAdapter& find_hf_converter(const std::string& name);
// modelzoo's converter aliases, as (alias, zoo converter), and as one
// "alias (converter), ..." list for messages and --help.
const std::vector<std::pair<std::string, std::string>>& hf_converter_aliases();
std::string hf_converter_alias_list();
// The converter name for a config.json, from its model_type; an error naming
// the model_type and the converters there are when none reads it.
std::string hf_converter_for(const nlohmann::json& config);
// Every converter name, sorted; and as one "a, b, c" list for messages.
std::vector<std::string> hf_converter_names();
std::string hf_converter_list();

}  // namespace zoo::models
