// Implementation of runner/checkpoint/checkpoint.h, part 2: naming and finding
// checkpoints, metadata, RNG and model state dicts. Reading and writing the
// files is in runner/checkpoint/checkpoint_file.cpp.
#include "runner/checkpoint/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include "configs/schema/yaml_util.h"
#include "data/text/hf_tokenizer.h"
#include "models/model.h"
#include "runner/checkpoint/sharded_checkpoint.h"
#include "runner/log.h"

namespace zoo::ckpt {

namespace fs = std::filesystem;

namespace {

std::optional<int64_t> to_step(const std::string& digits) {
  int64_t step = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return step;
}

}  // namespace

std::optional<int64_t> step_in_name(const std::string& path, const CheckpointNaming& naming) {
  const auto parsed = naming.match(fs::path(path).filename().string());
  return parsed ? to_step(parsed->first) : std::nullopt;
}

std::vector<CheckpointFile> list_checkpoints(const std::string& dir, const CheckpointNaming& naming) {
  std::vector<CheckpointFile> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto parsed = naming.match(e.path().filename().string());
    if (!parsed) continue;
    std::error_code file_ec;  // a link that loops or dangles, a FIFO: not a checkpoint, and no reason to stop
    if (!e.is_regular_file(file_ec)) {
      if (file_ec)
        log::warn(e.path().string() +
                  ": ignored; it is named as a checkpoint but cannot be read as a "
                  "file (" +
                  file_ec.message() + ")");
      continue;
    }
    if (const auto step = to_step(parsed->first)) out.push_back({e.path().string(), *step, parsed->second});
    else log::warn(e.path().string() + ": ignored; its step number does not fit in 64 bits");
  }
  std::sort(out.begin(), out.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return a.step != b.step ? a.step < b.step : a.timestamp < b.timestamp;
  });
  return out;
}

std::string new_checkpoint_path(const std::string& dir, int64_t step, const CheckpointNaming& naming) {
  fs::path plain = fs::path(dir) / naming.file_name(step);
  std::error_code ec;  // any entry of that name, a broken or looping link too, is kept
  if (!fs::exists(fs::symlink_status(plain, ec))) return plain.string();
  char stamp[32];
  std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d_%H%M%S", std::localtime(&now));
  return (fs::path(dir) / naming.file_name(step, stamp)).string();
}

c10::impl::GenericList checkpoint_metadata(const Params& params, const std::map<std::string, std::string>& extra) {
  c10::impl::GenericDict meta(c10::StringType::get(), c10::AnyType::get());
  meta.insert("version", std::string("zoo ") + ZOO_VERSION);
  meta.insert("model_name", params.model_name);
  YAML::Emitter e;
  e << params.resolved();
  meta.insert("params", std::string(e.c_str()));
  for (const auto& [k, v] : extra) meta.insert(k, v);
  c10::impl::GenericList metadata(c10::AnyType::get());
  metadata.push_back(meta);
  return metadata;
}

std::string lora_base_of(const c10::impl::GenericDict& dict, const std::string& path) {
  for (const auto& kv : model_weights(dict, path)) {
    const std::string& k = kv.key().toStringRef();
    if (k.size() > 7 && k.compare(k.size() - 7, 7, ".lora_A") == 0) {
      if (!dict.contains("__metadata__")) return "";
      const auto meta = dict.at("__metadata__").toList().get(0).toGenericDict();
      return meta.contains("lora_base") ? meta.at("lora_base").toStringRef() : "";
    }
  }
  return path;
}

std::string metadata_value(const c10::impl::GenericDict& dict, const std::string& key) {
  if (!dict.contains("__metadata__") || !dict.at("__metadata__").isList()) return "";
  const auto list = dict.at("__metadata__").toList();
  if (list.empty() || !list.get(0).isGenericDict()) return "";
  const auto meta = list.get(0).toGenericDict();
  return meta.contains(key) && meta.at(key).isString() ? meta.at(key).toStringRef() : "";
}

std::string lora_base_model_of(const c10::impl::GenericDict& dict) {
  const std::string named = metadata_value(dict, "lora_base_model");
  return named.empty() ? metadata_value(dict, "converted_from") : named;
}

std::string tokenizer_dir_of(const c10::impl::GenericDict& dict, const std::string& path,
                             std::vector<std::string>* searched) {
  std::vector<std::string> places = {fs::path(path).parent_path().string()};
  if (const std::string base = lora_base_of(dict, path); !base.empty() && base != path)
    places.push_back(fs::path(base).parent_path().string());
  for (auto& dir : places) {
    if (dir.empty()) dir = ".";
    if (searched) searched->push_back(dir);
    if (!text::tokenizer_files(dir).empty()) return dir;
  }
  return "";
}

Params params_of(const c10::impl::GenericDict& dict, const std::string& path,
                 const std::optional<std::string>& params_file, const std::string& flag) {
  if (params_file) return load_params(*params_file, YAML::Node());
  if (!dict.contains("__metadata__"))
    throw std::runtime_error(path + ": no params stored in the checkpoint; pass " + flag);
  std::string yaml = dict.at("__metadata__").toList().get(0).toGenericDict().at("params").toStringRef();
  YAML::Node stored = config::load_yaml_string(yaml, path + " (stored params)");
  // Only the model and data matter here; older zoo versions stored every
  // optimizer's keys, which today's per-optimizer checks would refuse, and
  // the run's task files need not be where they were.
  stored.remove("optimizer");
  stored.remove("eval_tasks");
  return params_from_node(stored, path + " (stored params)", YAML::Node());
}

c10::impl::GenericDict rng_state_dict() {
  c10::impl::GenericDict rng(c10::StringType::get(), c10::AnyType::get());
  rng.insert("torch_cpu", at::detail::getDefaultCPUGenerator().get_state());
  return rng;
}

void load_rng_state_dict(const c10::impl::GenericDict& saved) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(saved.at("torch_cpu").toTensor());
}

void prune_checkpoints(const std::string& dir, int64_t max, const std::string& keep, const CheckpointNaming& naming) {
  auto all = list_checkpoints(dir, naming);
  int64_t excess = static_cast<int64_t>(all.size()) - max;
  for (const auto& c : all) {
    if (excess <= 0) break;
    if (c.path == keep) continue;  // never delete what this run stands on
    fs::remove(c.path);
    fs::remove_all(shards_dir(c.path));  // a sharded checkpoint's shards
    log::info("Removed old checkpoint " + c.path + " (max_checkpoints " + std::to_string(max) + ")");
    --excess;
  }
}

c10::impl::GenericDict model_weights(const c10::impl::GenericDict& dict, const std::string& path) {
  if (dict.contains("model") && dict.at("model").isGenericDict()) return dict.at("model").toGenericDict();
  std::string keys;
  for (const auto& kv : dict)
    if (kv.key().isString()) keys += (keys.empty() ? "" : ", ") + kv.key().toStringRef();
  throw std::runtime_error(path + ": holds no model weights (no 'model' state dict; its top-level keys: " +
                           (keys.empty() ? std::string("none") : keys) +
                           "); expected a zoo/modelzoo checkpoint or a torch.save'd model state dict");
}

namespace {

// "model." (modelzoo's wrapper attribute) unless the model says otherwise.
std::string key_prefix(const torch::nn::Module& model) {
  const auto* m = dynamic_cast<const models::Model*>(&model);
  return m ? m->checkpoint_key_prefix() : "model.";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> model_state_names(const torch::nn::Module& model) {
  const std::string prefix = key_prefix(model);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : model.named_parameters()) out.emplace_back(prefix + p.key(), p.key());
  for (const auto& b : model.named_buffers()) out.emplace_back(prefix + b.key(), b.key());
  if (const auto* m = dynamic_cast<const models::Model*>(&model))
    for (const auto& [alias, source] : m->saved_aliases()) {
      std::vector<std::pair<std::string, std::string>> copies;
      for (const auto& [key, name] : out)
        if (key.rfind(prefix + source, 0) == 0)
          copies.emplace_back(prefix + alias + key.substr(prefix.size() + source.size()), name);
      out.insert(out.end(), copies.begin(), copies.end());
    }
  return out;
}

c10::impl::GenericDict model_state_dict(const torch::nn::Module& model) {
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& p : model.named_parameters()) tensors[p.key()] = p.value().detach().cpu();
  for (const auto& b : model.named_buffers()) tensors[b.key()] = b.value().detach().cpu();
  c10::impl::GenericDict out(c10::StringType::get(), c10::TensorType::get());
  // An alias holds the same tensor: no second copy in memory.
  for (const auto& [key, name] : model_state_names(model)) out.insert(key, tensors.at(name));
  return out;
}

namespace {

// The model's parameters and buffers by name.
std::map<std::string, torch::Tensor> model_tensors(const torch::nn::Module& model) {
  std::map<std::string, torch::Tensor> targets;
  for (const auto& p : model.named_parameters()) targets[p.key()] = p.value();
  for (const auto& b : model.named_buffers()) targets[b.key()] = b.value();
  return targets;
}

// Missing, unexpected and mis-shaped keys: an error (missing or unexpected
// ones only when strict, else returned as warnings).
std::vector<std::string> check_state(const std::map<std::string, torch::Tensor>& targets,
                                     const std::map<std::string, torch::Tensor>& saved, bool strict,
                                     const std::string& source) {
  std::vector<std::string> missing, unexpected;
  for (const auto& [k, t] : targets)
    if (!saved.count(k)) missing.push_back(k);
  for (const auto& [k, t] : saved)
    if (!targets.count(k)) unexpected.push_back(k);
  auto join = [](const std::vector<std::string>& v, size_t most = 20) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < most; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > most) s += ", ... (" + std::to_string(v.size()) + " in all)";
    return s;
  };
  if (missing.size() == targets.size() && !targets.empty())
    throw std::runtime_error(source + ": none of the checkpoint's " + std::to_string(saved.size()) +
                             " model keys matches the model (checkpoint: " + join(unexpected, 3) +
                             "; model: " + join(missing, 3) +
                             "); is it another model's checkpoint, or in Hugging Face's layout "
                             "(convert it with `zoo convert`)?");
  std::vector<std::string> report;
  if (!missing.empty()) report.push_back("missing model keys: " + join(missing));
  if (!unexpected.empty()) report.push_back("unexpected model keys: " + join(unexpected));
  if (strict && !report.empty()) {
    std::string msg = source + ": checkpoint does not match the model (";
    for (size_t i = 0; i < report.size(); ++i) msg += (i ? "; " : "") + report[i];
    throw std::runtime_error(msg + "); use --disable_strict_checkpoint_loading to load what matches");
  }
  for (const auto& [k, t] : targets) {
    auto it = saved.find(k);
    if (it != saved.end() && it->second.sizes() != t.sizes())
      throw std::runtime_error(source + ": model key " + k + " has shape " + c10::str(it->second.sizes()) +
                               " in the checkpoint but " + c10::str(t.sizes()) + " in the model");
  }
  return report;
}

}  // namespace

std::vector<std::string> load_model_state_dict(torch::nn::Module& model, const c10::impl::GenericDict& state,
                                               bool strict, const std::string& source, const CopyIntoModel& copy) {
  bool all_prefixed = state.size() > 0;
  for (const auto& kv : state)
    if (kv.key().toStringRef().rfind("model.", 0) != 0) all_prefixed = false;
  std::map<std::string, torch::Tensor> saved;
  for (const auto& kv : state) {
    std::string k = kv.key().toStringRef();
    saved[all_prefixed ? k.substr(6) : k] = kv.value().toTensor();
  }
  if (const auto* m = dynamic_cast<const models::Model*>(&model)) {
    saved = m->adapt_loaded_state(std::move(saved));
    for (const auto& [alias, source] : m->saved_aliases())
      for (auto it = saved.lower_bound(alias); it != saved.end() && it->first.rfind(alias, 0) == 0;)
        it = saved.erase(it);
  }
  std::map<std::string, torch::Tensor> targets = model_tensors(model);
  // A checkpoint without adapters is the base a LoRA run starts from: its
  // adapters keep their initial values (B = 0: the base model's function).
  auto is_adapter = [](const std::string& k) {
    return k.size() > 7 && (k.compare(k.size() - 7, 7, ".lora_A") == 0 || k.compare(k.size() - 7, 7, ".lora_B") == 0);
  };
  if (std::none_of(saved.begin(), saved.end(), [&](const auto& kv) { return is_adapter(kv.first); }))
    for (auto it = targets.begin(); it != targets.end();)
      it = is_adapter(it->first) ? targets.erase(it) : std::next(it);
  std::vector<std::string> report = check_state(targets, saved, strict, source);
  torch::NoGradGuard no_grad;
  for (auto& [k, t] : targets) {
    auto it = saved.find(k);
    if (it == saved.end()) continue;
    if (copy) copy(k, t, it->second);
    else t.copy_(it->second);
  }
  return report;
}

c10::impl::GenericDict model_state_dict_from(const torch::nn::Module& model, std::map<std::string, torch::Tensor> state,
                                             const std::string& source) {
  check_state(model_tensors(model), state, /*strict=*/true, source);
  const std::string prefix = key_prefix(model);
  c10::impl::GenericDict out(c10::StringType::get(), c10::TensorType::get());
  auto add = [&](const std::string& name, const torch::Tensor& like) {
    auto it = state.find(name);
    out.insert(prefix + name, it->second.to(like.scalar_type()).contiguous());
    state.erase(it);  // its source is freed here unless shared
  };
  for (const auto& p : model.named_parameters()) add(p.key(), p.value());
  for (const auto& b : model.named_buffers()) add(b.key(), b.value());
  return out;
}

}  // namespace zoo::ckpt
