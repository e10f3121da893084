// Implementation of runner/convert/convert.h.
#include "runner/convert/convert.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "configs/schema/yaml_util.h"
#include "data/text/hf_tokenizer.h"
#include "models/registry.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/convert/hf_config.h"
#include "runner/convert/peft.h"
#include "runner/convert/safetensors.h"
#include "runner/params/params.h"

namespace zoo::convert {

namespace fs = std::filesystem;

namespace {

// Params for fine-tuning the converted weights: the model as converted, and
// placeholders the user fills in (data_dir) before training.
YAML::Node finetune_params(const YAML::Node& model, const YAML::Node& optimizer, const YAML::Node& input,
                           const std::string& checkpoint, const std::string& output_dir) {
  YAML::Node p;
  for (const char* section : {"train_input", "eval_input"}) {
    p[section] = YAML::Clone(input);
    // The processor's data directory: data_dir, or src_data_dir when it reads that (T5's text);
    // processors with a `split` (ImageNet's) read one directory's train and val splits.
    const std::string split = std::string(section) == "train_input" ? "train" : "val";
    if (input["split"]) {
      p[section]["data_dir"] = "./data";
      p[section]["split"] = split;
    } else {
      p[section][input["src_data_dir"] ? "src_data_dir" : "data_dir"] = "./data/" + split;
    }
    p[section]["batch_size"] = 8;
  }
  p["model"] = model;
  p["optimizer"]["optimizer_type"] = "AdamW";
  p["optimizer"]["learning_rate"] = 1e-5;
  p["optimizer"]["weight_decay"] = 0.01;
  p["optimizer"]["max_gradient_norm"] = 1.0;
  for (const auto& kv : optimizer) p["optimizer"][kv.first.as<std::string>()] = kv.second;
  p["runconfig"]["num_steps"] = 1000;
  p["runconfig"]["checkpoint_steps"] = 500;
  p["runconfig"]["log_steps"] = 10;
  p["runconfig"]["checkpoint_path"] = checkpoint;
  p["runconfig"]["load_checkpoint_states"] = "model";
  p["runconfig"]["model_dir"] = (fs::path(output_dir) / "finetune").string();
  return p;
}

// A directory without config.json may hold a model HF keeps as several
// checkpoints (DPR's q_encoder/ and ctx_encoder/): the first sub-directory's.
std::string find_config_json(const fs::path& dir) {
  if (fs::exists(dir / "config.json") || !fs::is_directory(dir)) return (dir / "config.json").string();
  std::vector<fs::path> subdirs;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory() && fs::exists(entry.path() / "config.json")) subdirs.push_back(entry.path());
  std::sort(subdirs.begin(), subdirs.end());
  return ((subdirs.empty() ? dir : subdirs.front()) / "config.json").string();
}

// The config.json of each of the adapter's components (by sub-directory name) and all their tensors.
std::pair<nlohmann::json, models::StateDict> read_components(const models::HfAdapter& a, const fs::path& dir,
                                                             const std::string& converter) {
  nlohmann::json configs = nlohmann::json::object();
  models::StateDict all;
  for (const auto& part : a.components) {
    const fs::path sub = dir / part.dir;
    if (!fs::is_directory(sub))
      throw std::runtime_error(dir.string() + ": the " + converter + " converter reads a sub-directory " + part.dir +
                               "/ (Hugging Face keeps the model as one checkpoint per part)");
    configs[part.dir] = read_config_json((sub / "config.json").string());
    for (auto& [key, t] : read_hf_weights(sub.string())) {
      if (key.rfind(part.key_prefix, 0) != 0)
        throw std::runtime_error(sub.string() + ": tensor " + key + " is not the " + part.dir + "'s (expected keys " +
                                 part.key_prefix + "*)");
      all[key] = std::move(t);
    }
  }
  return {configs, all};
}

void hf_to_zoo(const ConvertCommand& c) {
  fs::path weights(c.checkpoint);
  const fs::path dir = fs::is_directory(weights) ? weights : weights.parent_path();
  std::string config_path = c.config ? *c.config : find_config_json(dir);
  nlohmann::json hf_config = read_config_json(config_path);
  const std::string converter = c.model.empty() ? models::hf_converter_for(hf_config) : c.model;
  const models::HfAdapter& a = models::find_hf_converter(converter);
  models::StateDict hf_weights;
  if (!a.components.empty()) {
    if (c.config)
      throw std::runtime_error("--config names one config.json; the " + converter +
                               " converter reads one in each part's sub-directory");
    std::tie(hf_config, hf_weights) = read_components(a, dir, converter);
    config_path = (dir / "*" / "config.json").string();  // for messages
  } else {
    hf_weights = read_hf_weights(c.checkpoint);
  }
  YAML::Node model, optimizer;
  nlohmann::json labels;  // label_vocab.json's, when the converter has one
  try {
    model = a.config_from_hf(hf_config);
    if (a.optimizer_from_hf) optimizer = a.optimizer_from_hf(hf_config);
    if (a.label_vocab_from_hf) labels = a.label_vocab_from_hf(hf_config);
  } catch (const nlohmann::json::exception& e) {  // a missing or mistyped field
    throw std::runtime_error(config_path + " (" + converter + "): " + describe_config_error(e, hf_config));
  } catch (const std::exception& e) {
    throw std::runtime_error(config_path + " (" + converter + "): " + e.what());
  }
  if (a.config_from_weights) a.config_from_weights(model, hf_weights);
  YAML::Node input(YAML::NodeType::Map);
  input["data_processor"] = "GptHDF5MapDataProcessor";
  if (a.input_from_hf)
    input =
        a.input_from_hf(hf_config, model, (a.components.empty() ? fs::path(config_path).parent_path() : dir).string());
  // Written with the params, once the weights have converted; both sections name it.
  const std::string labels_path = (fs::path(c.output_dir) / "label_vocab.json").string();
  if (!labels.is_null()) {
    model["label_vocab_file"] = labels_path;
    input["label_vocab_file"] = labels_path;
  }
  const std::string ckpt_path = (fs::path(c.output_dir) / "checkpoint_0.mdl").string();
  YAML::Node params_yaml = finetune_params(model, optimizer, input, ckpt_path, c.output_dir);
  Params params = params_from_node(params_yaml, config_path + " (converted)", YAML::Node());
  models::StateDict state;
  try {
    state = a.from_hf(std::move(hf_weights), *params.model);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(c.checkpoint + ": " + e.what());
  }
  // Checked against the model built on the meta device, as a strict load
  // checks it, and cast to its dtype one tensor at a time: a 7B conversion
  // never holds a second copy of the weights.
  auto shapes = params.model->build(torch::TensorOptions().device(torch::kMeta));
  c10::impl::GenericDict converted = ckpt::model_state_dict_from(*shapes, std::move(state), c.checkpoint);
  fs::create_directories(c.output_dir);
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("model", converted);
  d.insert("global_step", int64_t{0});
  d.insert("__metadata__", ckpt::checkpoint_metadata(params, {{"converted_from", c.checkpoint}}));
  ckpt::save_checkpoint_file(ckpt_path, d);
  // The tokenizer travels with the weights: zoo generate and zoo data find it beside the checkpoint.
  const auto tokenizer = text::tokenizer_files(dir.string());
  std::string copied;
  for (const auto& f : tokenizer) {
    fs::copy_file(f, fs::path(c.output_dir) / fs::path(f).filename(), fs::copy_options::overwrite_existing);
    copied += (copied.empty() ? "" : ", ") + fs::path(f).filename().string();
  }
  const std::string params_path = (fs::path(c.output_dir) / "params.yaml").string();
  config::write_yaml_file(
      params_path, params_yaml,
      "Converted from " + c.checkpoint + " by zoo convert." +
          (copied.empty()
               ? std::string()
               : "\nTokenizer: " + copied + " in " + c.output_dir +
                     " (zoo generate finds it; zoo data create-hdf5 --huggingface_tokenizer " + c.output_dir + ")"));
  if (!labels.is_null()) std::ofstream(labels_path) << labels.dump(2) << "\n";
  if (!tokenizer.empty())
    std::cout << "Copied the tokenizer (" << tokenizer.size() << " files) to " << c.output_dir << "\n";
  std::cout << "Wrote " << ckpt_path << " and " << params_path
            << " (set train_input/eval_input's data directory, then: zoo CPU --params " << params_path
            << " --mode train; back to Hugging Face: zoo convert CHECKPOINT --model " << converter
            << " --src-fmt zoo --tgt-fmt hf --output-dir DIR)\n";
}

// The converters whose Hugging Face model can hold `model` (their config.json
// does not refuse it), each with that config.json; one per distinct config.
std::vector<std::pair<std::string, nlohmann::json>> converters_holding(const models::ModelSpec& model) {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  for (const auto& name : models::hf_converter_names()) {
    if (models::find_hf_converter(name).headless) continue;  // only with --model: it drops the LM head
    try {
      nlohmann::json cfg = models::find_hf_converter(name).config_to_hf(model);
      const bool alias = std::any_of(out.begin(), out.end(), [&](const auto& o) { return o.second == cfg; });
      if (!alias) out.emplace_back(name, std::move(cfg));
    } catch (const std::exception&) {  // this one cannot hold it (or is another family's)
    }
  }
  return out;
}

// Every weight has the shape the params give it: a --config of another
// width would otherwise be written as a config.json its tensors contradict.
void check_weights_fit(const models::ModelSpec& spec, const models::StateDict& state, const std::string& path,
                       bool config_given) {
  const auto shapes = spec.build(torch::TensorOptions().device(torch::kMeta));
  for (const auto& p : shapes->named_parameters()) {
    const auto it = state.find(p.key());
    if (it != state.end() && it->second.sizes() != p.value().sizes())
      throw std::runtime_error(path + ": " + p.key() + " has shape " + c10::str(it->second.sizes()) + " where " +
                               (config_given ? "--config" : "the checkpoint's params") + " gives it " +
                               c10::str(p.value().sizes()) + "; the params do not describe these weights");
  }
}

// An export never lands in a directory that holds files: it would replace a
// config.json or weights the user has, without a word.
void refuse_non_empty(const std::string& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec) && !fs::is_empty(dir, ec))
    throw std::runtime_error("zoo convert: --output-dir " + dir +
                             " already holds files; give a new or empty directory (zoo does not overwrite an export)");
}

void zoo_to_hf(const ConvertCommand& c) {
  refuse_non_empty(c.output_dir);
  c10::impl::GenericDict dict = ckpt::load_checkpoint_file(c.checkpoint);
  Params params = ckpt::params_of(dict, c.checkpoint, c.config, "--config");
  models::StateDict state;
  for (const auto& kv : ckpt::model_weights(dict, c.checkpoint)) {
    std::string k = kv.key().toStringRef();
    state[k.rfind("model.", 0) == 0 ? k.substr(6) : k] = kv.value().toTensor();
  }
  // A model trained inside another (DPO's policy) exports alone, as modelzoo's converter drops ref_model.*.
  std::shared_ptr<const models::ModelSpec> exported = params.model;
  if (auto part = params.model->exported_part()) {
    models::StateDict own;
    for (auto& [k, t] : state)
      if (k.rfind(part->key_prefix, 0) == 0) own[k.substr(part->key_prefix.size())] = std::move(t);
    state = std::move(own);
    exported = part->spec;
    std::cout << "Exporting the " << params.model_name << " model's " << part->key_prefix << "* weights\n";
  }
  check_weights_fit(*exported, state, c.checkpoint, c.config.has_value());
  // Without --model: the one Hugging Face model type that can hold this model.
  std::string converter = c.model;
  nlohmann::json cfg;  // its config.json; a model HF cannot hold is refused before anything is written
  if (converter.empty()) {
    const auto holding = converters_holding(*exported);
    std::string names;
    for (const auto& [name, cfg] : holding) names += (names.empty() ? "" : ", ") + name;
    if (holding.size() != 1)
      throw std::runtime_error("zoo convert: " + c.checkpoint + ": pass --model: " +
                               (holding.empty()
                                    ? "no Hugging Face model type can hold this model (--model NAME says why "
                                      "NAME cannot; converters: " +
                                          models::hf_converter_list() + ")"
                                    : "the model exports as " + names));
    converter = holding.front().first;
    cfg = holding.front().second;
    std::cout << "Exporting as " << converter << ", the one Hugging Face model type that holds this model\n";
  }
  const models::HfAdapter& a = models::find_hf_converter(converter);
  if (!params.lora.empty()) {
    // A LoRA checkpoint: its adapters as PEFT's, and the model with them folded in.
    const auto layers = adapter_layers(*exported, params.lora);
    const std::string adapter_dir = (fs::path(c.output_dir) / "adapter").string();
    // PEFT names the Hugging Face model the adapter applies to; the zoo base checkpoint when that is unknown.
    std::string base = ckpt::lora_base_model_of(dict);
    if (base.empty()) base = ckpt::lora_base_of(dict, c.checkpoint);
    try {
      write_peft_adapter(adapter_dir, converter, *exported, layers, state, base);
      merge_adapters(state, layers);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(c.checkpoint + ": " + e.what());
    }
    std::cout << "Wrote the PEFT adapter " << adapter_dir << " (" << layers.size()
              << " layers) and, below, the model with the adapters merged in\n";
  }
  models::StateDict hf;
  try {
    if (cfg.is_null()) cfg = a.config_to_hf(*exported);
    hf = a.to_hf(state, *exported);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(c.checkpoint + ": " + e.what());
  }
  // One checkpoint, or one per part in its sub-directory.
  struct Written {
    fs::path dir;
    nlohmann::json config;
    models::StateDict tensors;
  };
  std::vector<Written> written;
  if (a.components.empty()) {
    written.push_back({c.output_dir, cfg, std::move(hf)});
  } else {
    for (const auto& part : a.components) written.push_back({fs::path(c.output_dir) / part.dir, cfg.at(part.dir), {}});
    for (auto& [key, t] : hf) {
      auto owner = std::find_if(a.components.begin(), a.components.end(),
                                [&](const auto& part) { return key.rfind(part.key_prefix, 0) == 0; });
      if (owner == a.components.end()) throw std::logic_error(converter + " export: " + key + " belongs to no part");
      written[size_t(owner - a.components.begin())].tensors[key] = std::move(t);
    }
  }
  // The tokenizer goes with the model, and config.json names its bos and eos as Hugging Face's configs do.
  const std::string tokenizer_dir = ckpt::tokenizer_dir_of(dict, c.checkpoint);
  std::unique_ptr<text::Tokenizer> tokenizer;
  try {
    if (!tokenizer_dir.empty()) tokenizer = text::load_huggingface_tokenizer(tokenizer_dir);
  } catch (const std::exception& e) {  // files to copy, but none that gives ids (a BERT vocab.txt, say)
    std::cout << "The tokenizer files in " << tokenizer_dir << " give no token ids (" << e.what()
              << "); config.json keeps the ids it has\n";
  }
  for (Written& w : written) {
    if (!tokenizer || !w.config.is_object()) continue;
    const auto& special = tokenizer->special_tokens();
    if (special.bos && !w.config.contains("bos_token_id")) w.config["bos_token_id"] = *special.bos;
    if (special.eos && !w.config.contains("eos_token_id")) w.config["eos_token_id"] = *special.eos;
  }
  for (const Written& w : written) {
    fs::create_directories(w.dir);
    write_safetensors((w.dir / "model.safetensors").string(), w.tensors, {{"format", "pt"}});
    std::ofstream((w.dir / "config.json").string()) << w.config.dump(2) << "\n";
    std::cout << "Wrote " << (w.dir / "model.safetensors").string() << " and " << (w.dir / "config.json").string()
              << "\n";
  }
  if (!tokenizer_dir.empty()) {
    for (const auto& f : text::tokenizer_files(tokenizer_dir))
      fs::copy_file(f, fs::path(c.output_dir) / fs::path(f).filename(), fs::copy_options::overwrite_existing);
    std::cout << "Copied the tokenizer from " << tokenizer_dir << " to " << c.output_dir << "\n";
  }
}

}  // namespace

// A PEFT adapter onto a zoo base checkpoint: the base's weights with the
// adapters, and its params with the lora_params that give them.
void peft_to_zoo(const ConvertCommand& c) {
  if (!c.base_checkpoint)
    throw std::runtime_error(
        "zoo convert --src-fmt peft: pass --base-checkpoint, the zoo checkpoint of the model the "
        "adapter was trained on (zoo convert makes one from the Hugging Face base)");
  refuse_non_empty(c.output_dir);
  const std::string& base_path = *c.base_checkpoint;
  c10::impl::GenericDict base = ckpt::load_checkpoint_file(base_path);
  Params base_params = ckpt::params_of(base, base_path, c.config, "--config");
  if (!base_params.lora.empty())
    throw std::runtime_error(base_path + ": already has LoRA adapters; give the checkpoint of the base model");
  std::string converter = c.model;
  if (converter.empty()) {
    // Model types that hold the same model (llama, mistral) name its layers alike: the first does.
    const auto holding = converters_holding(*base_params.model);
    if (holding.empty())
      throw std::runtime_error("zoo convert: " + base_path + ": no Hugging Face model type holds this model");
    converter = holding.front().first;
  }
  PeftImport adapter;
  try {
    adapter = read_peft_adapter(c.checkpoint, converter, *base_params.model);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("zoo convert: " + std::string(e.what()));
  }
  // The base's stored params, with the adapters' lora_params.
  YAML::Node yaml =
      config::load_yaml_string(base.at("__metadata__").toList().get(0).toGenericDict().at("params").toStringRef(),
                               base_path + " (stored params)");
  yaml["model"]["lora_params"] = models::lora_params_to_yaml(adapter.groups);
  const std::string ckpt_path = (fs::path(c.output_dir) / "checkpoint_0.mdl").string();
  yaml["runconfig"]["checkpoint_path"] = ckpt_path;
  yaml["runconfig"]["model_dir"] = (fs::path(c.output_dir) / "finetune").string();
  Params params = params_from_node(yaml, c.checkpoint + " (imported)", YAML::Node());
  c10::impl::GenericDict weights = ckpt::model_weights(base, base_path).copy();
  for (auto& [key, t] : adapter.tensors) weights.insert("model." + key, t);
  fs::create_directories(c.output_dir);
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("model", weights);
  d.insert("global_step", int64_t{0});
  d.insert("__metadata__",
           ckpt::checkpoint_metadata(params, {{"lora_base", base_path}, {"converted_from", c.checkpoint}}));
  ckpt::save_checkpoint_file(ckpt_path, d);
  const std::string params_path = (fs::path(c.output_dir) / "params.yaml").string();
  config::write_yaml_file(params_path, yaml);
  std::cout << "Wrote " << ckpt_path << " (" << base_path << " with the adapter's " << adapter.tensors.size() / 2
            << " layers) and " << params_path << "\n";
}

void run_convert(const ConvertCommand& c) {
  if (c.src_fmt == "peft" && c.tgt_fmt == "zoo") return peft_to_zoo(c);
  if (c.src_fmt == "hf" && c.tgt_fmt == "zoo") return hf_to_zoo(c);
  if (c.src_fmt == "zoo" && c.tgt_fmt == "hf") return zoo_to_hf(c);
  throw std::runtime_error("zoo convert: --src-fmt/--tgt-fmt must be hf -> zoo, zoo -> hf or peft -> zoo");
}

}  // namespace zoo::convert
