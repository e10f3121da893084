// Implementation of runner/tools/checkpoint_info.h.
#include "runner/tools/checkpoint_info.h"

#include <torch/torch.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "data/text/hf_tokenizer.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/checkpoint/sharded_checkpoint.h"
#include "runner/convert/safetensors.h"
#include "runner/log.h"
#include "runner/parallel/strategy.h"

namespace zoo::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kMaxDepth = 64;  // nesting of dicts and lists in a checkpoint

// As Python's torch names it (torch.float32, ...).
std::string dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat: return "float32";
    case torch::kDouble: return "float64";
    case torch::kHalf: return "float16";
    case torch::kBFloat16: return "bfloat16";
    case torch::kLong: return "int64";
    case torch::kInt: return "int32";
    case torch::kShort: return "int16";
    case torch::kChar: return "int8";
    case torch::kByte: return "uint8";
    case torch::kBool: return "bool";
    default: return c10::toString(t);
  }
}

// Tensors counted by dtype, without touching their data.
struct TensorStats {
  int64_t count = 0, elements = 0, bytes = 0;
  std::map<std::string, int64_t> dtypes;
  void add(torch::ScalarType dtype, int64_t numel) {
    ++count;
    elements += numel;
    bytes += numel * static_cast<int64_t>(c10::elementSize(dtype));
    ++dtypes[dtype_name(dtype)];
  }
  void add_all(const c10::IValue& v, int depth = 0) {
    if (depth > kMaxDepth) throw std::runtime_error("nested more than " + std::to_string(kMaxDepth) + " levels");
    if (v.isTensor()) add(v.toTensor().scalar_type(), v.toTensor().numel());
    else if (v.isGenericDict())
      for (const auto& kv : v.toGenericDict()) add_all(kv.value(), depth + 1);
    else if (v.isList())
      for (const auto& item : v.toListRef()) add_all(item, depth + 1);
  }
  json to_json() const { return {{"count", count}, {"elements", elements}, {"bytes", bytes}, {"dtypes", dtypes}}; }
};

int64_t disk_bytes(const fs::path& p) {
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return static_cast<int64_t>(fs::file_size(p, ec));
  int64_t total = 0;
  if (fs::is_directory(p, ec))
    for (const auto& e : fs::recursive_directory_iterator(p, ec))
      if (e.is_regular_file(ec)) total += static_cast<int64_t>(e.file_size(ec));
  return total;
}

// Integer keys that give a model's size, in a zoo model section or a Hugging Face config.json (*size*, num_*,
// *layers*, *heads*, ...): a summary any family gives, without building the model.
bool is_size_key(const std::string& key) {
  static const std::regex sizes("size|^num_|layers|heads|max_position_embeddings|vocab|experts|^d_|^n_");
  return std::regex_search(key, sizes);
}

json model_sizes(const YAML::Node& model) {
  json out = json::object();
  if (!model.IsMap()) return out;
  for (const auto& kv : model) {
    const std::string key = kv.first.as<std::string>();
    if (!kv.second.IsScalar() || !is_size_key(key)) continue;
    try {
      out[key] = kv.second.as<int64_t>();
    } catch (const YAML::Exception&) {  // a string or float: not a size
    }
  }
  return out;
}

// From "__metadata__": who wrote it, the model and its sizes, the optimizer, LoRA's base.
void read_metadata(const c10::impl::GenericDict& dict, json& info) {
  auto text = [&](const char* key) { return ckpt::metadata_value(dict, key); };
  if (!text("version").empty()) info["written_by"] = text("version");
  if (!text("lora_base").empty()) info["lora_base"] = text("lora_base");
  if (!text("converted_from").empty()) info["converted_from"] = text("converted_from");
  if (text("params").empty()) return;
  try {
    const YAML::Node params = YAML::Load(text("params"));
    info["model"] = {{"name", text("model_name")}, {"sizes", model_sizes(params["model"])}};
    if (params["optimizer"] && params["optimizer"]["optimizer_type"])
      info["optimizer_type"] = params["optimizer"]["optimizer_type"].as<std::string>();
  } catch (const YAML::Exception& e) {
    info["model"] = {{"name", text("model_name")}, {"params_error", e.what()}};
  }
}

json lora_of(const c10::impl::GenericDict& model) {
  int64_t layers = 0, rank = 0;
  for (const auto& kv : model) {
    const std::string key = kv.key().toStringRef();
    // modelzoo's keys: <layer>.lora_A (a PEFT-style <layer>.lora_A.weight read too)
    static const std::regex lora_a(R"(\.lora_A(\.weight)?$)");
    const bool adapter = std::regex_search(key, lora_a);
    if (!adapter || !kv.value().isTensor()) continue;
    ++layers;
    rank = kv.value().toTensor().size(0);
  }
  return layers == 0 ? json() : json{{"adapter_layers", layers}, {"r", rank}};
}

// An optimizer state dict {"state": {i: {name: tensor}}, "param_groups": [...]}.
json optimizer_of(const c10::IValue& v) {
  if (!v.isGenericDict()) return json();
  const auto opt = v.toGenericDict();
  json out = json::object();
  if (opt.contains("state") && opt.at("state").isGenericDict()) {
    TensorStats stats;
    std::set<std::string> names;
    const auto state = opt.at("state").toGenericDict();
    for (const auto& kv : state) {
      stats.add_all(kv.value());
      if (kv.value().isGenericDict())
        for (const auto& e : kv.value().toGenericDict()) names.insert(e.key().toStringRef());
    }
    out["parameters_with_state"] = static_cast<int64_t>(state.size());
    out["state"] = names;
    out["bytes"] = stats.bytes;
  }
  if (opt.contains("param_groups") && opt.at("param_groups").isList()) {
    const auto groups = opt.at("param_groups").toList();
    out["param_groups"] = groups.size();
    if (groups.size() > 0 && groups.get(0).isGenericDict() && groups.get(0).toGenericDict().contains("lr")) {
      const auto lr = groups.get(0).toGenericDict().at("lr");
      if (lr.isDouble()) out["lr"] = lr.toDouble();
    }
  }
  return out;
}

// A sharded checkpoint's index and its shards: each shard's pickle read, its tensors not.
void read_sharded(const c10::impl::GenericDict& index, const std::string& path, json& info) {
  const auto about = index.at("__sharded__").toGenericDict();
  const std::string id = about.at("id").toStringRef();
  const int world = static_cast<int>(about.at("world_size").toInt());
  std::map<std::string, int64_t> numel;
  for (const auto& kv : about.at("shapes").toGenericDict())
    numel[kv.key().toStringRef()] = c10::multiply_integers(kv.value().toIntVector());
  std::map<std::string, torch::ScalarType> dtype;
  TensorStats optimizer;
  std::set<std::string> optimizer_names;
  json shards = json::array();
  int present = 0;
  for (int r = 0; r < world; ++r) {
    const std::string shard = ckpt::shard_path(path, r, world);
    json s = {{"path", shard}, {"rank", r}};
    if (!fs::exists(shard)) {
      s["status"] = "missing";
    } else {
      try {
        const auto dict = ckpt::read_checkpoint_as_stored(shard).toGenericDict();
        const bool ours =
            dict.contains("__shard__") && dict.at("__shard__").toGenericDict().at("id").toStringRef() == id;
        s["status"] = ours ? "present" : "foreign (written by another save)";
        s["bytes"] = disk_bytes(shard);
        present += ours;
        if (ours)
          for (const auto& kv : dict.at("pieces").toGenericDict()) {
            const auto piece = kv.value().toGenericDict();
            dtype.emplace(kv.key().toStringRef(), piece.at("model").toTensor().scalar_type());
            for (const auto& e : piece.at("optimizer").toGenericDict()) {
              optimizer.add_all(e.value());
              optimizer_names.insert(e.key().toStringRef());
            }
          }
      } catch (const std::exception& e) {
        s["status"] = std::string("unreadable: ") + e.what();
      }
    }
    shards.push_back(s);
  }
  TensorStats weights;
  weights.add_all(index.at("model"));  // the buffers, kept whole in the index
  for (const auto& [name, n] : numel) weights.add(dtype.count(name) ? dtype.at(name) : torch::kFloat, n);
  info["weights"] = weights.to_json();
  info["sharding"] = {{"world_size", world}, {"present", present}, {"complete", present == world}, {"shards", shards}};
  if (!optimizer_names.empty())
    info["optimizer"] = {{"parameters_with_state", about.at("optimizer_names").toListRef().size()},
                         {"state", optimizer_names},
                         {"bytes", optimizer.bytes}};
}

json zoo_info(const std::string& path, const CheckpointInfoCommand& command) {
  json info = {{"path", path}};
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  try {
    const c10::IValue stored = ckpt::read_checkpoint_as_stored(path);
    if (!stored.isGenericDict()) throw std::runtime_error(path + ": holds no dict");
    dict = stored.toGenericDict();
  } catch (const std::runtime_error& e) {
    // Python's OrderedDicts (a torch.save'd state dict) and pre-1.6 files: the full reader takes those, reading
    // every tensor, which must fit in memory.
    const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
    if (static_cast<double>(disk_bytes(path)) > memory / 2) throw;
    log::warn(std::string(e.what()) + "; reading the whole file instead");
    dict = ckpt::load_checkpoint_file(path);
    info["kind"] = "torch.save";
  }
  const bool sharded = dict.contains("__sharded__");
  if (!info.contains("kind"))
    info["kind"] = sharded ? "zoo sharded" : dict.contains("__checksum__") ? "zoo" : "torch.save";
  info["bytes"] = disk_bytes(path) + (sharded ? disk_bytes(ckpt::shards_dir(path)) : 0);
  if (dict.contains("global_step") && dict.at("global_step").isInt()) info["step"] = dict.at("global_step").toInt();
  read_metadata(dict, info);
  const bool plain_state_dict = !dict.contains("model");
  if (sharded) {
    read_sharded(dict, path, info);
  } else {
    TensorStats weights;
    weights.add_all(plain_state_dict ? c10::IValue(dict) : dict.at("model"));
    info["weights"] = weights.to_json();
    if (!plain_state_dict && dict.at("model").isGenericDict()) {
      const json lora = lora_of(dict.at("model").toGenericDict());
      if (!lora.is_null()) info["lora"] = lora;
    }
    if (dict.contains("optimizer")) info["optimizer"] = optimizer_of(dict.at("optimizer"));
  }
  if (info.contains("optimizer") && info.contains("optimizer_type")) info["optimizer"]["type"] = info["optimizer_type"];
  info.erase("optimizer_type");
  if (info.contains("lora_base")) {
    if (!info.contains("lora")) info["lora"] = json::object();
    info["lora"]["base"] = info["lora_base"];
    info.erase("lora_base");
  }
  if (dict.contains("grad_scaler") && dict.at("grad_scaler").isGenericDict()) {
    const auto scaler = dict.at("grad_scaler").toGenericDict();
    if (scaler.contains("loss_scale")) info["grad_scaler"] = {{"loss_scale", scaler.at("loss_scale").toDouble()}};
  }
  if (!dict.contains("__checksum__")) {
    info["checksum"] = "none stored (not written by zoo)";
  } else if (command.verify) {
    try {
      (void)ckpt::load_checkpoint_file(path);  // checks the index's checksum and, assembling, every shard's
      info["checksum"] = sharded ? "verified (index and every shard)" : "verified";
    } catch (const std::exception& e) {
      info["checksum"] = std::string("FAILED: ") + e.what();
      info["checksum_failed"] = true;
    }
  } else {
    info["checksum"] = "not checked (--verify reads every tensor to check it)";
  }
  return info;
}

// A Hugging Face checkpoint: model.safetensors, its sharded index, or their directory; headers only.
json safetensors_info(const fs::path& given) {
  fs::path path = given;
  if (fs::is_directory(path)) {
    if (fs::exists(path / "model.safetensors.index.json")) path /= "model.safetensors.index.json";
    else if (fs::exists(path / "model.safetensors")) path /= "model.safetensors";
    else
      throw std::runtime_error(given.string() +
                               ": a directory without model.safetensors or its index json (a run's model_dir? zoo "
                               "checkpoint list " +
                               given.string() + " lists its checkpoints)");
  }
  json info = {{"path", path.string()}};
  std::vector<fs::path> files;
  if (path.extension() == ".json") {
    std::ifstream in(path);
    json index;
    try {
      index = json::parse(in);
    } catch (const std::exception& e) {
      throw std::runtime_error(path.string() + ": not JSON (" + e.what() + ")");
    }
    if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
      throw std::runtime_error(path.string() + ": expected a \"weight_map\" object of tensor name -> shard file");
    std::set<std::string> names;
    for (const auto& [name, file] : index.at("weight_map").items())
      if (file.is_string()) names.insert(file.get<std::string>());
    json shards = json::array();
    for (const auto& n : names) {
      const fs::path f = path.parent_path() / n;
      shards.push_back({{"path", f.string()}, {"status", fs::exists(f) ? "present" : "missing"}});
      if (fs::exists(f)) files.push_back(f);
    }
    info["kind"] = "safetensors index";
    info["sharding"] = {{"world_size", names.size()},
                        {"present", files.size()},
                        {"complete", files.size() == names.size()},
                        {"shards", shards}};
  } else {
    info["kind"] = "safetensors";
    files.push_back(path);
  }
  TensorStats weights;
  int64_t bytes = 0;
  for (const auto& f : files) {
    for (const auto& t : convert::read_safetensors_header(f.string()).tensors)
      weights.add(t.dtype, c10::multiply_integers(t.shape));
    bytes += disk_bytes(f);
  }
  info["bytes"] = bytes;
  info["weights"] = weights.to_json();
  info["checksum"] = "none stored (safetensors files carry none)";
  const fs::path config = path.parent_path() / "config.json";
  if (fs::exists(config)) {
    try {
      std::ifstream in(config);
      const json c = json::parse(in);
      json sizes = json::object();
      for (const auto& [k, v] : c.items())
        if (v.is_number_integer() && is_size_key(k)) sizes[k] = v;
      info["model"] = {{"name", c.value("model_type", std::string())}, {"sizes", sizes}};
      if (c.contains("architectures")) info["model"]["architectures"] = c.at("architectures");
    } catch (const std::exception& e) {
      info["model"] = {{"config_error", config.string() + ": " + e.what()}};
    }
  }
  return info;
}

std::string thousands(int64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0 && s[i - 1] != '-') out += ',';
    out += s[i];
  }
  return out;
}

std::string bytes_text(const json& b) { return parallel::memory_text(b.get<double>()); }

}  // namespace

json checkpoint_info(const CheckpointInfoCommand& command) {
  const fs::path path(command.path);
  std::error_code ec;
  if (!fs::exists(path, ec)) throw std::runtime_error(command.path + ": no such file or directory");
  const std::string ext = path.extension().string();
  json info = fs::is_directory(path, ec) || ext == ".safetensors" || ext == ".json" ? safetensors_info(path)
                                                                                    : zoo_info(command.path, command);
  const fs::path dir = fs::is_directory(path, ec) ? path : path.parent_path();
  info["tokenizer"] = json::array();
  for (const auto& f : text::tokenizer_files(dir.empty() ? "." : dir.string()))
    info["tokenizer"].push_back(fs::path(f).filename().string());
  return info;
}

void describe_info(const json& info, std::ostream& out) {
  out << info.at("path").get<std::string>() << ": " << info.at("kind").get<std::string>() << " checkpoint, "
      << bytes_text(info.at("bytes"));
  if (info.contains("step")) out << ", step " << info.at("step").get<int64_t>();
  if (info.contains("written_by")) out << ", written by " << info.at("written_by").get<std::string>();
  out << "\n";
  if (info.contains("converted_from"))
    out << "  converted from: " << info.at("converted_from").get<std::string>() << "\n";
  if (info.contains("model")) {
    const json& m = info.at("model");
    out << "  model: " << m.value("name", std::string("?"));
    if (m.contains("architectures")) out << " (" << m.at("architectures").dump() << ")";
    if (m.contains("sizes"))
      for (const auto& [k, v] : m.at("sizes").items()) out << ", " << k << " " << v.dump();
    for (const char* err : {"params_error", "config_error"})
      if (m.contains(err)) out << " (" << m.at(err).get<std::string>() << ")";
    out << "\n";
  }
  const json& w = info.at("weights");
  out << "  weights: " << thousands(w.at("count")) << " tensors, " << thousands(w.at("elements")) << " elements, "
      << bytes_text(w.at("bytes")) << " (";
  bool first = true;
  for (const auto& [dtype, n] : w.at("dtypes").items())
    out << (first ? "" : ", ") << dtype << ": " << n.get<int64_t>(), first = false;
  out << ")\n";
  if (info.contains("optimizer")) {
    const json& o = info.at("optimizer");
    out << "  optimizer: " << o.value("type", std::string("(type not recorded)"));
    if (o.contains("lr")) out << ", lr " << o.at("lr").get<double>();
    if (o.contains("parameters_with_state")) {
      out << "; state for " << thousands(o.at("parameters_with_state")) << " parameters (";
      first = true;
      for (const auto& n : o.at("state")) out << (first ? "" : ", ") << n.get<std::string>(), first = false;
      out << "), " << bytes_text(o.at("bytes"));
    }
    out << "\n";
  } else {
    out << "  optimizer: none (weights only)\n";
  }
  if (info.contains("grad_scaler"))
    out << "  grad scaler: loss scale " << info.at("grad_scaler").at("loss_scale").get<double>() << "\n";
  if (info.contains("lora")) {
    const json& l = info.at("lora");
    out << "  LoRA: ";
    if (l.contains("adapter_layers"))
      out << l.at("adapter_layers").get<int64_t>() << " adapter layers, r " << l.at("r").get<int64_t>();
    if (l.contains("base"))
      out << (l.contains("adapter_layers") ? "; " : "") << "base " << l.at("base").get<std::string>();
    out << "\n";
  }
  if (info.contains("sharding")) {
    const json& s = info.at("sharding");
    out << "  sharding: " << s.at("present").get<int64_t>() << " of " << s.at("world_size").get<int64_t>()
        << " shards present" << (s.at("complete").get<bool>() ? "" : " (INCOMPLETE: it cannot be loaded)") << "\n";
    for (const auto& shard : s.at("shards"))
      if (shard.at("status") != "present")
        out << "    " << shard.at("path").get<std::string>() << ": " << shard.at("status").get<std::string>() << "\n";
  }
  out << "  checksum: " << info.at("checksum").get<std::string>() << "\n";
  out << "  tokenizer: ";
  if (info.at("tokenizer").empty()) out << "none beside it";
  first = true;
  for (const auto& f : info.at("tokenizer")) out << (first ? "" : ", ") << f.get<std::string>(), first = false;
  out << "\n";
}

}  // namespace zoo::tools
