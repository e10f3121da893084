// Implementation of runner/params/trainer_format.h, the Trainer -> legacy direction,
// and the key table both directions share (runner/params/trainer_format_map.h). The
// correspondences follow modelzoo's own legacy -> Trainer converter (2.3+).
#include "runner/params/trainer_format.h"

#include <algorithm>
#include <map>
#include <set>

#include "models/registry.h"
#include "runner/params/trainer_format_map.h"

namespace zoo::trainer_format {

const std::vector<KeyMap>& key_map() {
  static const std::vector<KeyMap> m = {
      {"init.backend.backend_type", "runconfig.target_device"},  // first: the form convert-legacy writes
      {"init.device", "runconfig.target_device"},
      {"init.model_dir", "runconfig.model_dir"},
      {"init.seed", "runconfig.seed"},
      {"init.backend.validate_only", "runconfig.validate_only"},
      {"init.backend.compile_dir", "runconfig.compile_dir"},
      {"init.backend.compile_only", "runconfig.compile_only"},
      {"init.backend.enable_distributed", "runconfig.enable_distributed"},
      {"init.backend.main_process_id", "runconfig.main_process_id"},
      {"init.backend.dist_backend", "runconfig.dist_backend"},
      {"init.backend.init_method", "runconfig.init_method"},
      {"init.backend.sync_batchnorm", "runconfig.sync_batchnorm"},
      {"init.precision.enabled", "model.mixed_precision"},
      {"init.precision.fp16_type", "model.fp16_type"},
      {"init.precision.precision_opt_level", "runconfig.precision_opt_level"},
      {"init.precision.loss_scaling_factor", "optimizer.loss_scaling_factor"},
      {"init.precision.initial_loss_scale", "optimizer.initial_loss_scale"},
      {"init.precision.steps_per_increase", "optimizer.steps_per_increase"},
      {"init.precision.min_loss_scale", "optimizer.min_loss_scale"},
      {"init.precision.max_loss_scale", "optimizer.max_loss_scale"},
      {"init.precision.max_gradient_norm", "optimizer.max_gradient_norm"},
      {"init.precision.max_gradient_value", "optimizer.max_gradient_value"},
      {"init.precision.log_loss_scale", "optimizer.log_summaries"},
      {"init.loop.num_steps", "runconfig.num_steps"},
      {"init.loop.max_steps", "runconfig.max_steps"},
      {"init.loop.num_epochs", "runconfig.num_epochs"},
      {"init.loop.steps_per_epoch", "runconfig.steps_per_epoch"},
      {"init.loop.eval_frequency", "runconfig.eval_frequency"},
      {"init.loop.eval_steps", "runconfig.eval_steps"},
      {"init.loop.grad_accum_steps", "optimizer.grad_accum_steps"},
      {"init.checkpoint.steps", "runconfig.checkpoint_steps"},
      {"init.checkpoint.disable_strict_checkpoint_loading", "runconfig.disable_strict_checkpoint_loading"},
      {"init.checkpoint.autoload_last_checkpoint", "runconfig.autoload_last_checkpoint"},
      {"init.checkpoint.save_initial_checkpoint", "runconfig.save_initial_checkpoint"},
      {"init.checkpoint.checkpoint_name", "runconfig.checkpoint_name"},
      {"init.checkpoint.checkpoint_root", "runconfig.checkpoint_root"},
      {"init.checkpoint.strict_version", "runconfig.strict_version"},
      {"init.logging.log_steps", "runconfig.log_steps"},
      {"init.logging.log_level", "runconfig.logging"},
      {"init.logging.wsc_log_level", "runconfig.wsc_log_level"},
      {"init.logging.enable_act_frequency", "runconfig.enable_act_frequency"},
  };
  return m;
}

const std::vector<CallbackMap>& callback_map() {
  static const std::vector<CallbackMap> m = {
      {"callbacks", "ComputeNorm", "", "optimizer.log_summaries"},
      {"callbacks", "CheckLoss", "", "runconfig.check_loss_values"},
      {"callbacks", "LoadCheckpointStates", "load_checkpoint_states", "runconfig.load_checkpoint_states"},
      {"callbacks", "KeepNCheckpoints", "n", "runconfig.max_checkpoints"},
      {"callbacks", "Lora", "lora_params", "model.lora_params"},
      {"callbacks", "ScopedTrainFlags", "csx.performance.micro_batch_size", "train_input.micro_batch_size"},
      {"callbacks", "EvalTasks", "tasks", "eval_tasks.tasks"},
      {"callbacks", "EvalTasks", "tokenizer", "eval_tasks.tokenizer"},
      {"callbacks", "EvalTasks", "batch_size", "eval_tasks.batch_size"},
      {"callbacks", "EvalTasks", "max_gen_toks", "eval_tasks.max_gen_toks"},
      {"callbacks", "EvalTasks", "limit", "eval_tasks.limit"},
      {"loggers", "TensorBoardLogger", "summary_dir", "runconfig.summary_dir"},
  };
  return m;
}

namespace {

// Callbacks and loggers that only do something on Cerebras systems (or for
// services zoo does not talk to): accepted with a warning.
const std::set<std::string>& ignored_callbacks() {
  static const std::set<std::string> s = {
      "GlobalFlags", "ScopedTrainFlags", "ScopedValidateFlags", "DebugArgsPath", "LogInputSummaries", "DumpActivations",
      "OpProfiler",  "Listener",         "HFCacheDir",          "LogSparsity",   "WandbLogger"};
  return s;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Whether two YAML values mean the same: scalars as YAML reads them (True and
// true, 1e-5 and 0.00001 agree), anything else as written.
bool same_value(const YAML::Node& a, const YAML::Node& b) {
  if (a.IsScalar() && b.IsScalar()) {
    bool x = false, y = false;
    if (YAML::convert<bool>::decode(a, x) && YAML::convert<bool>::decode(b, y)) return x == y;
    double u = 0, v = 0;
    if (YAML::convert<double>::decode(a, u) && YAML::convert<double>::decode(b, v)) return u == v;
    return a.Scalar() == b.Scalar();
  }
  YAML::Emitter x, y;
  x << YAML::Flow << a;
  y << YAML::Flow << b;
  return std::string(x.c_str()) == y.c_str();
}

// Builds the legacy layout out of the Trainer file's nodes.
class Reader {
 public:
  Reader(const config::Context& ctx) : ctx_(ctx), aliases_(std::make_shared<config::PathAliases>()) {
    for (const char* s : {"runconfig", "optimizer", "model", "train_input", "eval_input", "sparsity", "eval_tasks"})
      sections_[s] = YAML::Node(YAML::NodeType::Map);
  }

  // Places `value` (written at trainer path `from`) at legacy path `to`.
  void put(const std::string& to, const YAML::Node& value, const std::string& from) {
    const size_t dot = to.find('.');
    const std::string section = to.substr(0, dot), key = to.substr(dot + 1);
    YAML::Node target = sections_.at(section);
    if (target[key]) {
      if (!same_value(target[key], value)) {
        YAML::Emitter a, b;
        a << YAML::Flow << target[key];
        b << YAML::Flow << value;
        ctx_.fail(
            value, "trainer." + from,
            "sets " + to + ", which another key of this file also sets, to " + b.c_str() + " instead of " + a.c_str());
      }
      return;
    }
    target[key] = value;
    alias(to, "trainer." + from);
  }
  void alias(const std::string& legacy, const std::string& trainer) { aliases_->emplace_back(legacy, trainer); }
  void copy_into(const std::string& section, const YAML::Node& map, const std::string& from) {
    if (!present(map)) return;
    if (!map.IsMap()) ctx_.fail(map, "trainer." + from, "expected a mapping, got " + config::describe_node(map));
    YAML::Node target = sections_.at(section);
    for (const auto& kv : map) target[kv.first] = kv.second;  // the original key node keeps its line
    alias(section, "trainer." + from);
  }
  [[noreturn]] void fail(const YAML::Node& at, const std::string& path, const std::string& what) const {
    ctx_.fail(at, "trainer." + path, what);
  }
  void warn(const YAML::Node& at, const std::string& path, const std::string& what) const {
    ctx_.warn(at, "trainer." + path, what);
  }
  YAML::Node& section(const std::string& name) { return sections_.at(name); }
  std::shared_ptr<const config::PathAliases> aliases() const { return aliases_; }

  // A mapping's keys, each checked against `known` (an error with a hint otherwise).
  void each(const YAML::Node& map, const std::string& path, const std::vector<std::string>& known,
            const std::function<void(const std::string&, const YAML::Node& key, const YAML::Node& value)>& fn) const {
    if (!present(map)) return;
    if (!map.IsMap()) fail(map, path, "expected a mapping, got " + config::describe_node(map));
    for (const auto& kv : map) {
      const std::string key = kv.first.as<std::string>();
      if (std::find(known.begin(), known.end(), key) == known.end())
        fail(kv.first, path + "." + key,
             "unknown key" + config::did_you_mean(key, known) + " (known: " + join(known) + ")");
      fn(key, kv.first, kv.second);
    }
  }
  // The one {Name: value} entry of a list item.
  std::pair<YAML::Node, YAML::Node> single(const YAML::Node& item, const std::string& path) const {
    if (!item.IsMap() || item.size() != 1) fail(item, path, "expected a mapping with one entry {Name: {...}}");
    auto it = item.begin();
    return {it->first, it->second};
  }

 private:
  config::Context ctx_;
  std::map<std::string, YAML::Node> sections_;
  std::shared_ptr<config::PathAliases> aliases_;
};

std::vector<std::string> group_keys(const std::string& group) {
  std::vector<std::string> keys;
  for (const auto& m : key_map())
    if (m.trainer.rfind(group + ".", 0) == 0) keys.push_back(m.trainer.substr(group.size() + 1));
  return keys;
}

const KeyMap* by_trainer(const std::string& path) {
  for (const auto& m : key_map())
    if (m.trainer == path) return &m;
  return nullptr;
}

void read_optimizer(Reader& r, const YAML::Node& node) {
  if (!node.IsMap() || node.size() != 1) r.fail(node, "init.optimizer", "expected one entry {OptimizerName: {...}}");
  const auto [name, inner] = r.single(node, "init.optimizer");
  const std::string path = "init.optimizer." + name.as<std::string>();
  r.section("optimizer")["optimizer_type"] = name;  // the key node: errors point at it
  r.alias("optimizer", "trainer." + path);
  r.alias("optimizer.optimizer_type", "trainer.init.optimizer");
  if (!present(inner)) return;
  if (!inner.IsMap()) r.fail(inner, path, "expected a mapping of the optimizer's keys");
  for (const auto& kv : inner) r.section("optimizer")[kv.first] = kv.second;
}

// One {SchedulerName: {...}} as a legacy scheduler mapping.
YAML::Node legacy_scheduler(const Reader& r, const YAML::Node& item, const std::string& path) {
  const auto [name, inner] = r.single(item, path);
  YAML::Node m(YAML::NodeType::Map);
  m["scheduler"] = name;
  if (present(inner)) {
    if (!inner.IsMap()) r.fail(inner, path, "expected a mapping of the scheduler's keys");
    for (const auto& kv : inner) m[kv.first] = kv.second;
  }
  return m;
}

// One scheduler entry {Class: {...}} at trainer path `at`.
void read_scheduler(Reader& r, const YAML::Node& entry, const std::string& at) {
  const auto [name, inner] = r.single(entry, at);
  const std::string cls = name.as<std::string>(), path = at + "." + cls;
  // modelzoo 2.4+ wraps muP runs' schedule in ScalePerParamLR, which applies
  // each parameter group's learning-rate scale: zoo always does.
  if (cls == "ScalePerParamLR") {
    YAML::Node wrapped;
    r.each(inner, path, {"scheduler"},
           [&](const std::string&, const YAML::Node&, const YAML::Node& v) { wrapped = v; });
    if (!present(wrapped)) r.fail(inner, path, "expected scheduler: {...}, the schedule whose rate it scales");
    return read_scheduler(r, wrapped, path + ".scheduler");
  }
  if (cls != "SequentialLR" && cls != "ChainedScheduler") {
    YAML::Node m = legacy_scheduler(r, entry, at);
    // A ConstantLR with nothing but its rate is a plain learning rate (what a legacy scalar converts to).
    r.section("optimizer")["learning_rate"] =
        cls == "ConstantLR" && m.size() == 2 && m["learning_rate"] ? m["learning_rate"] : m;
    r.alias("optimizer.learning_rate", "trainer." + path);
    return;
  }
  YAML::Node list(YAML::NodeType::Sequence);
  std::vector<int64_t> milestones;
  YAML::Node given_milestones;
  r.each(inner, path, {"schedulers", "milestones"},
         [&](const std::string& key, const YAML::Node&, const YAML::Node& v) {
           if (key == "milestones") given_milestones = v;
           if (key != "schedulers") return;
           if (!v.IsSequence() || v.size() == 0)
             r.fail(v, path + ".schedulers", "expected a non-empty list of schedulers");
           for (size_t i = 0; i < v.size(); ++i) {
             YAML::Node m = legacy_scheduler(r, v[i], path + ".schedulers." + std::to_string(i));
             if (cls == "ChainedScheduler") m["main_scheduler"] = "chained";
             list.push_back(m);
           }
         });
  if (list.size() == 0) r.fail(inner, path, "expected schedulers: [...]");
  // modelzoo derives SequentialLR's milestones from total_iters; given ones must agree.
  if (present(given_milestones)) {
    int64_t total = 0;
    YAML::Node expected(YAML::NodeType::Sequence);
    for (size_t i = 0; i + 1 < list.size(); ++i) {
      if (!list[i]["total_iters"])
        r.fail(list[i], path + ".schedulers." + std::to_string(i), "total_iters is required");
      expected.push_back(total += list[i]["total_iters"].as<int64_t>());
    }
    YAML::Emitter a, b;
    a << YAML::Flow << expected;
    b << YAML::Flow << given_milestones;
    if (std::string(a.c_str()) != b.c_str())
      r.fail(given_milestones, path + ".milestones",
             std::string("expected ") + a.c_str() + " (the running sum of total_iters), got " + b.c_str());
  }
  r.section("optimizer")["learning_rate"] = list;
  r.alias("optimizer.learning_rate", "trainer." + path + ".schedulers");
}

void read_schedulers(Reader& r, const YAML::Node& node) {
  if (!node.IsSequence() || node.size() != 1)
    r.fail(node, "init.schedulers", "expected a list with one scheduler (zoo drives one learning rate for all groups)");
  read_scheduler(r, node[0], "init.schedulers.0");
}

// callbacks: / loggers: lists of {Name: {...}}.
void read_callbacks(Reader& r, const YAML::Node& node, const std::string& list_name) {
  const std::string path = "init." + list_name;
  if (!present(node)) return;
  if (!node.IsSequence()) r.fail(node, path, "expected a list of {Name: {...}}");
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string item_path = path + "." + std::to_string(i);
    const auto [name_node, value] = r.single(node[i], item_path);
    const std::string name = name_node.as<std::string>();
    std::vector<const CallbackMap*> maps;
    for (const auto& m : callback_map())
      if (m.list == list_name && m.name == name) maps.push_back(&m);
    if (name == "EleutherEvalHarness" || name == "BigCodeEvalHarness")
      r.fail(name_node, item_path,
             name +
                 " runs lm-eval's tasks by name; zoo scores task files on disk: use the "
                 "EvalTasks callback (docs/evaluation.md), with files from scripts/lm_eval_tasks.py");
    if (maps.empty() && !ignored_callbacks().count(name)) {
      std::vector<std::string> known;
      for (const auto& m : callback_map())
        if (m.list == list_name) known.push_back(m.name);
      for (const auto& n : ignored_callbacks()) known.push_back(n);
      r.fail(name_node, item_path,
             "unsupported " + list_name.substr(0, list_name.size() - 1) + " '" + name + "'" +
                 config::did_you_mean(name, known) + " (zoo knows: " + join(known) + ")");
    }
    bool used_all = true;
    if (!maps.empty() && maps.front()->key.empty()) {  // a flag: {Name: {}} or {Name: true|false}
      if (value.IsScalar()) r.put(maps.front()->legacy, value, item_path + "." + name);
      else r.put(maps.front()->legacy, YAML::Node(true), item_path + "." + name);
      continue;
    }
    if (present(value) && value.IsMap()) {
      for (const auto& kv : value) {
        const std::string key = kv.first.as<std::string>();
        auto m = std::find_if(maps.begin(), maps.end(), [&](const CallbackMap* c) { return c->key == key; });
        if (m != maps.end()) {
          r.put((*m)->legacy, kv.second, item_path + "." + name + "." + key);
        } else if (name == "EvalTasks") {  // zoo's own: nothing in it is for Cerebras systems
          std::vector<std::string> known;
          for (const auto* c : maps) known.push_back(c->key);
          r.fail(kv.first, item_path + "." + name + "." + key,
                 "unknown key" + config::did_you_mean(key, known) + " (known: " + join(known) + ")");
        } else {
          used_all = false;
        }
      }
    } else if (present(value)) {
      used_all = false;
    }
    if (!used_all || maps.empty())
      r.warn(name_node, item_path + "." + name,
             maps.empty() ? "ignored (applies to Cerebras systems or services zoo does not use)"
                          : "ignored apart from the keys zoo maps (the rest applies to Cerebras systems only)");
  }
}

// A val_dataloader(s) entry: one mapping (or a list of one).
YAML::Node one_dataloader(const Reader& r, const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence()) return node;
  if (node.size() != 1)
    r.fail(node, path, "zoo evaluates one dataloader per run; this lists " + std::to_string(node.size()));
  return node[0];
}

}  // namespace

bool is_trainer_format(const YAML::Node& root) { return root.IsMap() && root["trainer"]; }

LegacyView to_legacy(const YAML::Node& root, const config::Context& ctx, const std::string& mode) {
  Reader r(ctx);
  for (const auto& kv : root)
    if (kv.first.as<std::string>() != "trainer")
      ctx.fail(kv.first, kv.first.as<std::string>(),
               "unknown section: a Trainer-format params file holds only `trainer:` (zoo reads the legacy layout "
               "with train_input, eval_input, model, optimizer, runconfig separately)");
  YAML::Node trainer = root["trainer"];
  if (trainer.IsSequence()) {
    if (trainer.size() != 1)
      ctx.fail(trainer, "trainer",
               "zoo runs one trainer per params file; this one lists " + std::to_string(trainer.size()));
    trainer = trainer[0];
  }
  YAML::Node fit, validate, validate_all;
  r.each(trainer, "", {"init", "fit", "validate", "validate_all"},
         [&](const std::string& key, const YAML::Node&, const YAML::Node& v) {
           if (key == "fit") fit = v;
           if (key == "validate") validate = v;
           if (key == "validate_all") validate_all = v;
         });
  const YAML::Node init = trainer["init"];
  if (!present(init)) ctx.fail(trainer, "trainer.init", "required: the model, optimizer and loop of the run");
  // A model zoo does not build is the first thing to say (before, say, how its schedulers differ).
  if (const YAML::Node model = init["model"]; present(model) && model.IsMap())
    if (const YAML::Node name = model["name"]; present(name) && name.IsScalar())
      if (auto unbuilt = models::unbuilt_model_name(name.as<std::string>())) r.fail(name, "init.model.name", *unbuilt);
  const std::vector<std::string> init_keys = {"backend",    "device",     "model_dir", "seed",     "model",
                                              "optimizer",  "schedulers", "precision", "sparsity", "loop",
                                              "checkpoint", "logging",    "callbacks", "loggers",  "autorestart"};
  r.each(init, "init", init_keys, [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& v) {
    const std::string path = "init." + key;
    if (key == "model") return r.copy_into("model", v, path);
    if (key == "optimizer") return read_optimizer(r, v);
    if (key == "schedulers") return;  // after the optimizer, whose learning_rate they replace
    if (key == "callbacks" || key == "loggers") return read_callbacks(r, v, key);
    if (key == "autorestart") return r.warn(key_node, path, "ignored (zoo resumes by autoload_last_checkpoint)");
    if (key == "sparsity") return r.copy_into("sparsity", v, path);
    if (const KeyMap* m = by_trainer(path)) return r.put(m->legacy, v, path);
    std::vector<std::string> known = group_keys(path);
    if (key == "backend") {
      known.push_back("cluster_config");
      // The CSX compiler's debug and performance flags (csx.debug.*, csx.performance.*).
      if (present(v) && v.IsMap())
        for (const auto& kv : v)
          if (kv.first.as<std::string>().rfind("csx.", 0) == 0) known.push_back(kv.first.as<std::string>());
    }
    r.each(v, path, known, [&](const std::string& sub, const YAML::Node& sub_key, const YAML::Node& sv) {
      if (key == "backend" && sub == "cluster_config")
        return r.warn(sub_key, path + "." + sub, "ignored (applies to Cerebras clusters only)");
      if (key == "backend" && sub.rfind("csx.", 0) == 0)
        return r.warn(sub_key, path + "." + sub, "ignored (a flag of the Cerebras compiler)");
      r.put(by_trainer(path + "." + sub)->legacy, sv, path + "." + sub);
    });
  });
  if (present(init["schedulers"])) read_schedulers(r, init["schedulers"]);

  r.each(fit, "fit", {"train_dataloader", "val_dataloader", "ckpt_path"}, [](auto&&...) {});
  r.each(validate, "validate", {"val_dataloader", "ckpt_path"}, [](auto&&...) {});
  r.each(validate_all, "validate_all", {"val_dataloaders", "ckpt_paths"}, [](auto&&...) {});
  auto get = [](const YAML::Node& n, const char* key) {
    return present(n) && n.IsMap() && n[key].IsDefined() ? n[key] : YAML::Node();  // never a yaml-cpp zombie
  };
  // The dataloaders and checkpoint of the task `mode` runs, as modelzoo's run.py picks them.
  struct Source {
    YAML::Node node;
    std::string path;
  };
  std::vector<Source> eval_sources;
  Source ckpt;
  if (mode == "eval") {
    eval_sources = {{get(validate, "val_dataloader"), "validate.val_dataloader"},
                    {get(fit, "val_dataloader"), "fit.val_dataloader"}};
    ckpt = {get(validate, "ckpt_path"), "validate.ckpt_path"};
  } else if (mode == "eval_all") {
    eval_sources = {{get(validate_all, "val_dataloaders"), "validate_all.val_dataloaders"},
                    {get(validate, "val_dataloader"), "validate.val_dataloader"},
                    {get(fit, "val_dataloader"), "fit.val_dataloader"}};
    const YAML::Node paths = get(validate_all, "ckpt_paths");
    if (present(paths))
      r.fail(paths, "validate_all.ckpt_paths",
             "zoo's eval_all evaluates every checkpoint in model_dir; for one checkpoint use --mode eval "
             "with --checkpoint_path");
  } else {
    eval_sources = {{get(fit, "val_dataloader"), "fit.val_dataloader"},
                    {get(validate, "val_dataloader"), "validate.val_dataloader"}};
    ckpt = {get(fit, "ckpt_path"), "fit.ckpt_path"};
  }
  if (present(get(fit, "train_dataloader")))
    r.copy_into("train_input", get(fit, "train_dataloader"), "fit.train_dataloader");
  for (const auto& s : eval_sources) {
    if (!present(s.node)) continue;
    r.copy_into("eval_input", one_dataloader(r, s.node, s.path), s.path);
    break;
  }
  if (present(ckpt.node)) r.put("runconfig.checkpoint_path", ckpt.node, ckpt.path);

  LegacyView view;
  view.root = YAML::Node(YAML::NodeType::Map);
  for (const char* s : {"train_input", "eval_input", "model", "optimizer", "runconfig", "sparsity", "eval_tasks"})
    if (r.section(s).size() > 0 || std::string(s) == "model" || std::string(s) == "runconfig")
      view.root[s] = r.section(s);
  view.aliases = r.aliases();
  return view;
}

}  // namespace zoo::trainer_format
