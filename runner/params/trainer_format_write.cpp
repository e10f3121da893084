// The legacy -> Trainer direction of runner/params/trainer_format.h (`zoo config
// convert-legacy`), from the same table as the reader.
#include "runner/optim/lr_schedule.h"
#include "runner/params/params.h"
#include "runner/params/trainer_format.h"
#include "runner/params/trainer_format_map.h"

namespace zoo::trainer_format {
namespace {

// Sets trainer[path] (dot-separated), creating the mappings on the way.
void set_path(YAML::Node root, const std::string& path, const YAML::Node& value) {
  YAML::Node node = root;
  size_t start = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; start = dot + 1, dot = path.find('.', start)) {
    const std::string key = path.substr(start, dot - start);
    if (!node[key]) node[key] = YAML::Node(YAML::NodeType::Map);
    node.reset(node[key]);
  }
  node[path.substr(start)] = value;
}

YAML::Node trainer_scheduler(const YAML::Node& legacy) {
  YAML::Node inner(YAML::NodeType::Map);
  std::string name = "ConstantLR";
  if (legacy.IsScalar()) {
    inner["learning_rate"] = legacy;
  } else {
    for (const auto& kv : legacy) {
      const std::string key = kv.first.as<std::string>();
      if (key == "scheduler") {
        const std::string cls = optim::scheduler_class_name(kv.second.as<std::string>());
        name = cls.empty() ? kv.second.as<std::string>() : cls;
      } else if (key != "main_scheduler") {
        inner[key] = kv.second;
      }
    }
  }
  YAML::Node out(YAML::NodeType::Map);
  out[name] = inner;
  return out;
}

}  // namespace

YAML::Node from_legacy(const YAML::Node& legacy, const config::Context& ctx) {
  if (is_trainer_format(legacy)) ctx.fail(legacy["trainer"], "trainer", "already in the Trainer format");
  if (!legacy.IsMap()) ctx.fail(legacy, "", "expected a legacy params mapping (train_input, model, ...)");
  YAML::Node t(YAML::NodeType::Map);
  t["init"] = YAML::Node(YAML::NodeType::Map);  // first, as modelzoo writes it
  YAML::Node callbacks(YAML::NodeType::Sequence), loggers(YAML::NodeType::Sequence);
  auto to_callback = [&](const std::string& legacy_path, const YAML::Node& value) {
    for (const auto& m : callback_map()) {
      if (m.legacy != legacy_path) continue;
      YAML::Node entry(YAML::NodeType::Map), inner(YAML::NodeType::Map);
      if (m.key.empty()) {
        bool on = false;
        if (!value.IsScalar() || !YAML::convert<bool>::decode(value, on) || !on) return true;  // a flag that is off
        entry[m.name] = inner;
      } else {
        YAML::Node list = m.list == "callbacks" ? callbacks : loggers;
        for (size_t i = 0; i < list.size(); ++i)  // one entry per callback, holding each of its keys
          if (static_cast<const YAML::Node&>(list[i])[m.name]) return list[i][m.name][m.key] = value, true;
        inner[m.key] = value;
        entry[m.name] = inner;
      }
      (m.list == "callbacks" ? callbacks : loggers).push_back(entry);
      return true;
    }
    return false;
  };
  auto to_key = [&](const std::string& legacy_path, const YAML::Node& value) {
    for (const auto& m : key_map())
      if (m.legacy == legacy_path) return set_path(t, m.trainer, value), true;
    return false;
  };
  YAML::Node optimizer_inner(YAML::NodeType::Map);
  std::string optimizer_type = "AdamW";
  bool has_optimizer = false;
  for (const auto& section : legacy) {
    const std::string name = section.first.as<std::string>();
    const YAML::Node& body = section.second;
    if (!present(body)) continue;
    if (name == "train_input" || name == "eval_input") {
      YAML::Node loader(YAML::NodeType::Map);
      for (const auto& kv : body) {
        if (kv.first.as<std::string>() == "micro_batch_size" && name == "train_input")
          to_callback("train_input.micro_batch_size", kv.second);
        else loader[kv.first] = kv.second;
      }
      if (name == "train_input") {
        set_path(t, "fit.train_dataloader", loader);
      } else {
        set_path(t, "fit.val_dataloader", loader);
        set_path(t, "validate.val_dataloader", loader);
        set_path(t, "validate_all.val_dataloaders", loader);
      }
      continue;
    }
    if (name == "sparsity") {
      set_path(t, "init.sparsity", body);
      continue;
    }
    if (const char* why = ignored_section(name)) {  // nothing a Trainer file holds either
      ctx.warn(section.first, name, std::string(why) + "; dropped");
      continue;
    }
    if (name != "model" && name != "optimizer" && name != "runconfig" && name != "eval_tasks")
      ctx.fail(section.first, name,
               "unknown section (expected train_input, eval_input, model, optimizer, runconfig, sparsity, eval_tasks)");
    if (name == "optimizer") has_optimizer = true;
    for (const auto& kv : body) {
      const std::string key = kv.first.as<std::string>(), path = name + "." + key;
      if (path == "runconfig.mode") continue;  // the mode comes from the command line
      if (path == "runconfig.checkpoint_path") {
        set_path(t, "fit.ckpt_path", kv.second);
        set_path(t, "validate.ckpt_path", kv.second);
      } else if (path == "optimizer.optimizer_type") {
        optimizer_type = kv.second.as<std::string>();
      } else if (path == "optimizer.learning_rate") {
        YAML::Node schedulers(YAML::NodeType::Sequence);
        if (kv.second.IsSequence()) {
          bool chained = false;
          YAML::Node parts(YAML::NodeType::Sequence);
          for (const auto& item : kv.second) {
            if (item.IsMap() && item["main_scheduler"] && item["main_scheduler"].as<std::string>() == "chained")
              chained = true;
            parts.push_back(trainer_scheduler(item));
          }
          YAML::Node inner(YAML::NodeType::Map), entry(YAML::NodeType::Map);
          inner["schedulers"] = parts;
          entry[chained ? "ChainedScheduler" : "SequentialLR"] = inner;
          schedulers.push_back(entry);
        } else {
          schedulers.push_back(trainer_scheduler(kv.second));
        }
        set_path(t, "init.schedulers", schedulers);
      } else if (to_callback(path, kv.second) || to_key(path, kv.second)) {
      } else if (name == "optimizer") {
        optimizer_inner[kv.first] = kv.second;
      } else if (name == "model") {
        set_path(t, "init.model." + key, kv.second);
      } else {
        ctx.warn(kv.first, path, "dropped: it has no place in the Trainer format and does not change a zoo run");
      }
    }
  }
  if (has_optimizer) {
    YAML::Node opt(YAML::NodeType::Map);
    opt[optimizer_type] = optimizer_inner;
    set_path(t, "init.optimizer", opt);
  }
  if (callbacks.size()) set_path(t, "init.callbacks", callbacks);
  if (loggers.size()) set_path(t, "init.loggers", loggers);
  YAML::Node out(YAML::NodeType::Map);
  out["trainer"] = t;
  return out;
}

}  // namespace zoo::trainer_format
