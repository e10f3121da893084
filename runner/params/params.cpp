// Implementation of runner/params/params.h.
#include "runner/params/params.h"

#include <algorithm>
#include <sstream>

#include "configs/schema/yaml_util.h"
#include "data/registry.h"
#include "models/registry.h"
#include "runner/optim/registry.h"
#include "runner/params/trainer_format.h"

namespace zoo {

const config::Schema<PrecisionConfig>& PrecisionConfig::schema() {
  using P = PrecisionConfig;
  static const config::Schema<P> s =
      config::Schema<P>("model (precision keys)", "Mixed precision, read from the model section as in modelzoo.")
          .field("mixed_precision", &P::mixed_precision, "Train with reduced-precision activations.")
          .field("fp16_type", &P::fp16_type, "float16, bfloat16 or cbfloat16 (treated as bfloat16).",
                 config::one_of({"float16", "bfloat16", "cbfloat16"}))
          .renamed("use_bfloat16", "fp16_type", [](const YAML::Node& v) {  // R1.x: true -> bfloat16
            bool bf16 = false;
            if (!v.IsScalar() || !YAML::convert<bool>::decode(v, bf16)) return v;
            return YAML::Node(bf16 ? "bfloat16" : "float16");
          });
  return s;
}

namespace {

const std::vector<std::string> kSections = {"train_input", "eval_input", "model",     "optimizer",
                                            "runconfig",   "sparsity",   "eval_tasks"};
const std::vector<std::string> kPrecisionKeys = {"mixed_precision", "fp16_type", "use_bfloat16"};

bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

// Keys zoo ignores because they steer Cerebras hardware still take only the
// values modelzoo accepts: a typo there is a typo, not a setting.
void check_cerebras_values(const YAML::Node& runconfig, const config::Context& ctx) {
  const YAML::Node level = runconfig["precision_opt_level"];
  if (present(level) &&
      (!level.IsScalar() || (level.Scalar() != "0" && level.Scalar() != "1" && level.Scalar() != "2")))
    ctx.fail(level, "precision_opt_level",
             "expected 0, 1 or 2 (a Cerebras setting zoo ignores), got " + config::describe_value(level));
  const YAML::Node device = runconfig["target_device"];
  if (present(device) &&
      (!device.IsScalar() || (device.Scalar() != "CPU" && device.Scalar() != "GPU" && device.Scalar() != "CSX")))
    ctx.fail(device, "target_device", "expected CPU, GPU or CSX, got " + config::describe_value(device));
}

// Whether the input section's data processor has `key` among its options (an
// unknown or missing processor is reported when the section is parsed).
bool processor_declares(const YAML::Node& in, const std::string& key) {
  const YAML::Node name = static_cast<const YAML::Node&>(in)["data_processor"];
  if (!name || !name.IsScalar()) return true;
  for (const data::DataProcessor* p : data::data_processors())
    if (p->name == name.Scalar())
      return std::any_of(p->fields.begin(), p->fields.end(), [&](const config::FieldInfo& f) { return f.key == key; });
  return true;
}

// The value at a dotted key path of a mapping ("vae.scaling_factor"); undefined when absent.
YAML::Node model_key_at(const YAML::Node& section, const std::string& path) {
  if (!section.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const size_t dot = path.find('.');
  const YAML::Node next = section[path.substr(0, dot)];  // const lookup: adds no key
  if (!next) return YAML::Node(YAML::NodeType::Undefined);
  return dot == std::string::npos ? next : model_key_at(next, path.substr(dot + 1));
}

// "a, b, c": feature names in messages and in --help-config.
std::string comma_joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& x : names) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Every feature the model reads must be in the input's batches, and rows
// that pack several sequences need a model that keeps them apart.
void check_features(const models::ModelSpec& model, const std::string& model_name, const data::InputSpec& input,
                    const std::string& section) {
  const auto& produced = input.produces();
  const std::vector<std::string> optional = model.reads_if_present();
  for (const auto& f : models::kPackedSequenceFeatures)
    if (std::find(produced.begin(), produced.end(), f) != produced.end() &&
        std::find(optional.begin(), optional.end(), f) == optional.end())
      input.origin().fail("use_vsl", input.processor() + " yields rows that pack several sequences (" + f +
                                         "), but model '" + model_name +
                                         "' cannot keep them apart: it would attend across them; use unpacked data");
  std::vector<std::string> missing;
  for (const auto& f : model.consumes())
    if (std::find(produced.begin(), produced.end(), f) == produced.end()) missing.push_back(f);
  if (missing.empty()) return;
  input.origin().fail("data_processor", input.processor() + " does not produce " + comma_joined(missing) +
                                            ", which model '" + model_name + "' needs (it reads " +
                                            comma_joined(model.consumes()) + "; " + input.processor() + " yields " +
                                            comma_joined(produced) + ")");
}

// A sample longer than the model's positions fails only once training
// reaches the model; the params alone already tell.
void check_sequence_length(const models::ModelSpec& model, const data::InputSpec& input) {
  const auto limit = model.max_sequence_length(), length = input.sequence_length();
  if (!limit || !length || *length <= *limit) return;
  input.origin().fail(
      "max_sequence_length",
      std::to_string(*length) + " tokens per sample, more than model.max_position_embeddings " +
          std::to_string(*limit) + " (" +
          model.origin().context().where(model.origin().mark("max_position_embeddings")) +
          "): the model has no positions beyond it; raise max_position_embeddings or shorten the samples");
}

// What each parallel strategy takes besides the model (runner/parallel/):
// full sharding splits every weight into flat shards over the ranks, so an
// optimizer that reads a whole tensor's statistics, or sparsity's per-weight
// masks, cannot run on it.
void check_parallelism(const Params& p, const YAML::Node& root_in, const YAML::Node& runconfig,
                       const config::Context& optimizer_ctx, const config::Context& sparsity_ctx) {
  if (p.runconfig.parallelism() != Parallelism::full) return;
  const std::string sharding_at = optimizer_ctx.where(runconfig["sharding"]);
  if (p.has_optimizer) {
    const optim::OptimizerEntry* entry = optim::find_optimizer(p.optimizer.optimizer_type);
    if (entry && !entry->elementwise) {
      const YAML::Node optimizer = root_in["optimizer"];
      optimizer_ctx.fail(optimizer.IsMap() && optimizer["optimizer_type"] ? optimizer["optimizer_type"] : optimizer,
                         "optimizer_type",
                         entry->name +
                             " updates each weight from statistics of its whole tensor, which "
                             "runconfig.sharding: full splits over the ranks (" +
                             sharding_at +
                             "); use sharding: "
                             "optimizer, or an elementwise optimizer (AdamW, SGD, ...)");
    }
  }
  if (p.sparsity)
    sparsity_ctx.fail(root_in["sparsity"], "",
                      "needs each rank to hold whole weights, which runconfig.sharding: full "
                      "splits over the ranks (" +
                          sharding_at +
                          "); use runconfig.sharding: "
                          "optimizer or none with it");
}

}  // namespace

config::Context Params::context(const std::string& section) const {
  config::Context c;
  c.file = file;
  c.path = section;
  c.warnings = const_cast<std::vector<std::string>*>(&warnings);
  return c;
}

const char* ignored_section(const std::string& name) {
  if (name == "description" || name == "tag")  // modelzoo 2.1's DiT files name themselves
    return "ignored (a note on the file, which modelzoo does not read either)";
  if (name == "csconfig")  // e.g. use_cbfloat16 in 2.0/2.2 MNIST and DPR files
    return "ignored: settings of a Cerebras system (CS-2) run, which do not apply on CPU or GPU";
  return nullptr;
}

Params params_from_node(const YAML::Node& root_file, const std::string& name, const YAML::Node& overrides) {
  Params p;
  p.file = name;
  config::Context top = p.context("");
  YAML::Node root_in = root_file;
  if (trainer_format::is_trainer_format(root_file)) {
    const std::string mode = overrides.IsMap() && overrides["mode"] ? overrides["mode"].as<std::string>() : "train";
    trainer_format::LegacyView view = trainer_format::to_legacy(root_file, top, mode);
    root_in.reset(view.root);  // rebinds: assignment would write through to the caller's tree
    top.aliases = view.aliases;
    p.trainer_format = true;
  }
  auto section_ctx = [&](const std::string& section) {
    config::Context c = p.context(section);
    c.aliases = top.aliases;
    return c;
  };
  if (!root_in.IsMap())
    top.fail(root_in, "",
             "expected a mapping with sections train_input, eval_input, model, optimizer, runconfig "
             "(or modelzoo's trainer:)");
  for (const auto& kv : root_in) {
    const std::string key = kv.first.as<std::string>();
    if (const char* why = ignored_section(key)) {
      top.warn(kv.first, key, why);
      continue;
    }
    if (std::find(kSections.begin(), kSections.end(), key) == kSections.end())
      top.fail(
          kv.first, key,
          "unknown section" + config::did_you_mean(key, kSections) +
              " (expected train_input, eval_input, model, optimizer, runconfig, sparsity, eval_tasks, or modelzoo's "
              "trainer:)");
  }

  // runconfig: CLI overrides win over the file. A fresh map holding the
  // original nodes, so messages keep their line numbers.
  YAML::Node runconfig(YAML::NodeType::Map);
  const YAML::Node runconfig_in = root_in["runconfig"];
  if (runconfig_in.IsMap())
    for (const auto& kv : runconfig_in) runconfig[kv.first] = kv.second;
  else if (present(runconfig_in))
    top.fail(runconfig_in, "runconfig", "expected a mapping, got " + config::describe_node(runconfig_in));
  check_cerebras_values(runconfig, section_ctx("runconfig"));  // before the command line replaces the device
  // The environment's switches (ZOO_CUDA_KERNELS, ...) override the file; the command line overrides both.
  for (const auto& kv : runconfig_from_environment()) runconfig[kv.first.as<std::string>()] = kv.second;
  if (overrides.IsMap())
    for (const auto& kv : overrides) runconfig[kv.first.as<std::string>()] = kv.second;
  p.runconfig = RunConfig::schema().parse(runconfig, section_ctx("runconfig"));
  p.runconfig.checkpoint_path_on_command_line = overrides.IsMap() && overrides["checkpoint_path"];

  if (present(root_in["sparsity"]))
    p.sparsity = SparsityConfig::schema().parse(root_in["sparsity"], section_ctx("sparsity"));
  if (present(root_in["eval_tasks"]))
    p.eval_tasks = EvalTasksConfig::schema().parse(root_in["eval_tasks"], section_ctx("eval_tasks"));

  if (present(root_in["optimizer"])) {
    p.has_optimizer = true;
    p.optimizer = OptimizerConfig::parse(root_in["optimizer"], section_ctx("optimizer"));
  }
  check_parallelism(p, root_in, runconfig, section_ctx("optimizer"), section_ctx("sparsity"));

  // model: split off runner-owned keys, then the family reads the rest.
  const YAML::Node model_in = root_in["model"];
  if (!model_in.IsMap()) top.fail(present(model_in) ? model_in : root_in, "model", "required: a mapping of model keys");
  YAML::Node model(YAML::NodeType::Map), precision(YAML::NodeType::Map);
  YAML::Node name_node;
  for (const auto& kv : model_in) {
    const std::string key = kv.first.as<std::string>();
    if (key == "name")
      name_node = kv.second, p.model_name = config::Value<std::string>::parse(kv.second, section_ctx("model"), "name");
    else if (std::find(kPrecisionKeys.begin(), kPrecisionKeys.end(), key) != kPrecisionKeys.end())
      precision[kv.first] = kv.second;
    else if (key == "lora_params") p.lora = models::parse_lora_params(kv.second, section_ctx("model"));
    else model[kv.first] = kv.second;  // keep the original key node (and its line)
  }
  p.precision = PrecisionConfig::schema().parse(precision, section_ctx("model"));
  const models::ModelFamily* family = nullptr;
  if (!model_in["name"]) {  // modelzoo's configs leave the family to the run.py that starts them
    std::vector<std::string> keys;
    for (const auto& kv : model) keys.push_back(kv.first.as<std::string>());
    if (auto unbuilt = models::unbuilt_model_key(keys))
      section_ctx("model").fail(model_in[unbuilt->first], unbuilt->first, unbuilt->second);
    family = models::family_taking_keys(keys);
    const models::ModelFamily& fallback = models::find_model(p.model_name);
    if (family && family != &fallback) {
      std::string deciding;
      for (const auto& k : keys)
        if (!fallback.accepts_key(k)) deciding += (deciding.empty() ? "" : ", ") + k;
      p.model_name = family->name;
      section_ctx("model").warn(model_in, "name",
                                "not given; " + deciding + " are keys of modelzoo's " + family->name +
                                    " model, not of " + fallback.name + ", so zoo builds " + family->name +
                                    " (set model.name to choose)");
    }
  }
  try {
    if (!family) family = &models::find_model(p.model_name);
  } catch (const std::invalid_argument& e) {
    section_ctx("model").fail(name_node, "name", e.what());
  }
  for (const auto& [model_key, input_key] : family->model_keys_from_input) {
    if (static_cast<const YAML::Node&>(model)[model_key]) continue;
    for (const char* section : {"train_input", "eval_input"}) {
      const YAML::Node in = root_in[section];
      if (in.IsMap() && in[input_key]) {
        model[model_key] = in[input_key];  // the input's node, so messages name its line
        break;
      }
    }
  }
  p.model = family->parse(model, section_ctx("model"));

  for (const char* section : {"train_input", "eval_input"}) {
    YAML::Node in = root_in[section];
    if (!present(in)) continue;  // modelzoo trains without eval_input, evaluates without train_input
    if (in.IsMap() && !static_cast<const YAML::Node&>(in)["data_processor"] &&
        !family->default_data_processor.empty()) {
      YAML::Node named(YAML::NodeType::Map);  // a copy naming the family's processor (nodes keep their lines)
      named["data_processor"] = family->default_data_processor;
      for (const auto& kv : in) named[kv.first] = kv.second;
      in.reset(named);
    }
    for (const auto& entry : family->input_keys_from_model) {
      if (!in.IsMap()) break;
      const std::string& key = entry.input_key;
      if (!processor_declares(in, key)) continue;  // e.g. disable_nsp means nothing to BERT's HDF5 files
      const YAML::Node given = static_cast<const YAML::Node&>(in)[key];
      std::string from_key;
      for (const auto& path : entry.model_keys)
        if (present(model_key_at(model, path))) {
          from_key = path;
          break;
        }
      if (from_key.empty()) continue;
      const YAML::Node from = model_key_at(model, from_key);
      if (given && entry.must_agree && !config::same_value(given, from))
        section_ctx(section).fail(given, key,
                                  "is " + config::describe_value(given) + " but the model's " + from_key + " is " +
                                      config::describe_value(from) + "; they must agree (or leave it out here)");
      if (!given) {
        YAML::Node with(YAML::NodeType::Map);  // a copy with the model's value (nodes keep their lines)
        for (const auto& kv : in) with[kv.first] = kv.second;
        with[key] = from;
        in.reset(with);
      }
    }
    auto spec = data::parse_input(in, section_ctx(section));
    check_features(*p.model, p.model_name, *spec, section);
    check_sequence_length(*p.model, *spec);
    (std::string(section) == "train_input" ? p.train_input : p.eval_input) = spec;
  }
  return p;
}

Params load_params(const std::string& file, const YAML::Node& overrides) {
  std::vector<std::string> warnings;  // the file's, before those of its sections
  const YAML::Node root = config::load_yaml_file(file, &warnings);
  Params p = params_from_node(root, file, overrides);
  p.warnings.insert(p.warnings.begin(), warnings.begin(), warnings.end());
  return p;
}

void check_inputs_for_mode(const Params& p) {
  const std::string& mode = p.runconfig.mode;
  const bool trains = mode == "train" || mode == "train_and_eval";
  const bool evaluates = mode != "train";
  if (trains && !p.train_input)
    p.context("train_input")
        .fail(YAML::Node(), "",
              "required for --mode " + mode + " but missing from the params" +
                  (p.trainer_format ? " (give trainer.fit.train_dataloader)" : ""));
  if (trains && !p.has_optimizer)
    p.context("optimizer")
        .fail(YAML::Node(), "",
              "required for --mode " + mode + " but missing from the params" +
                  (p.trainer_format ? " (give trainer.init.optimizer)" : ""));
  // How long to train, and when to evaluate: known from the params (and
  // flags) alone, so said before anything runs, naming the file.
  const RunConfig& rc = p.runconfig;
  const config::Context runconfig = p.context("runconfig");
  if (trains && !rc.num_epochs && !rc.num_steps && !rc.max_steps)
    runconfig.fail(YAML::Node(), "",
                   "set one of num_steps, num_epochs or max_steps (in the params or on the command "
                   "line) to say how long to train");
  if (mode == "train_and_eval" && !rc.num_epochs && !rc.eval_frequency)
    runconfig.fail(YAML::Node(), "eval_frequency", "required for train_and_eval with num_steps or max_steps");
  if (mode == "train_and_eval" && !rc.num_epochs && rc.steps_per_epoch)
    runconfig.fail(YAML::Node(), "steps_per_epoch", "cannot be used with num_steps or max_steps in train_and_eval");
  if (evaluates && !p.eval_input)
    p.context("eval_input")
        .fail(YAML::Node(), "",
              "required for --mode " + mode + " but missing from the params" +
                  (p.trainer_format ? " (give trainer.fit.val_dataloader or "
                                      "trainer.validate.val_dataloader)"
                                    : ""));
}

YAML::Node Params::resolved() const {
  YAML::Node out(YAML::NodeType::Map);
  if (train_input) out["train_input"] = train_input->to_yaml();
  if (eval_input) out["eval_input"] = eval_input->to_yaml();
  YAML::Node model_out = model->to_yaml();
  model_out["name"] = model_name;
  YAML::Node prec = PrecisionConfig::schema().to_yaml(precision);
  for (const auto& kv : prec) model_out[kv.first] = kv.second;
  if (!lora.empty()) model_out["lora_params"] = models::lora_params_to_yaml(lora);
  out["model"] = model_out;
  if (has_optimizer) out["optimizer"] = optimizer.to_yaml();
  out["runconfig"] = RunConfig::schema().to_yaml(runconfig);
  if (sparsity) out["sparsity"] = SparsityConfig::schema().to_yaml(*sparsity);
  if (eval_tasks) out["eval_tasks"] = EvalTasksConfig::schema().to_yaml(*eval_tasks);
  return out;
}

namespace {

// One table of the reference: a section's keys, under a heading and what it is.
struct SchemaSection {
  std::string heading, doc;
  std::vector<config::FieldInfo> fields;
  std::string notes;  // text after the table
};

std::vector<SchemaSection> schema_sections() {
  std::vector<SchemaSection> out;
  out.push_back({"runconfig", RunConfig::schema().doc(), RunConfig::schema().describe(), ""});
  std::string per = "Each optimizer takes the common keys (";
  for (const auto& k : optim::common_optimizer_keys()) per += k + (k == "log_summaries" ? "" : ", ");
  per += ") and only its own:\n";
  for (const auto& e : optim::optimizer_registry()) {
    per += "  " + e.name + ":";
    for (const auto& k : e.keys) per += " " + k;
    per += (e.keys.empty() ? " (none)" : "") + std::string(" -- defaults ") + e.defaults + "\n";
  }
  out.push_back({"optimizer", OptimizerConfig::schema().doc(), OptimizerConfig::schema().describe(), per});
  out.push_back({"optimizer.learning_rate (each scheduler mapping)", "", optim::scheduler_fields(), ""});
  out.push_back({"sparsity", SparsityConfig::schema().doc(), SparsityConfig::schema().describe(), ""});
  out.push_back({"eval_tasks", EvalTasksConfig::schema().doc(), EvalTasksConfig::schema().describe(), ""});
  out.push_back({"model (all families)", PrecisionConfig::schema().doc(), PrecisionConfig::schema().describe(), ""});
  out.push_back({"model.lora_params (all families; a mapping, or a list of them)", models::LoraGroup::schema().doc(),
                 models::LoraGroup::schema().describe(), ""});
  for (const models::ModelFamily* f : models::model_families()) {
    std::string heading = "model, name: " + f->name;
    for (const auto& a : f->aliases) heading += " | " + a;
    std::string reads = comma_joined(f->consumes);
    if (!f->reads_if_present.empty())
      reads += "; when a batch has them (packed rows), " + comma_joined(f->reads_if_present);
    out.push_back({heading, f->doc + " Reads features: " + reads + ".", f->fields, ""});
  }
  for (const data::DataProcessor* d : data::data_processors()) {
    out.push_back({"train_input / eval_input, data_processor: " + d->name,
                   d->doc + " Yields features: " + comma_joined(d->produces) + ".", d->fields, ""});
  }
  return out;
}

// A table cell: pipes escaped, newlines as spaces.
std::string cell(std::string text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return out;
}

}  // namespace

std::string describe_all_schemas() {
  std::string s;
  for (const SchemaSection& sec : schema_sections()) {
    const std::string title = sec.heading + (sec.doc.empty() ? ":" : ": " + sec.doc);
    s += config::format_field_table(title, sec.fields);
    if (!sec.notes.empty()) {
      std::stringstream notes(sec.notes);
      for (std::string line; std::getline(notes, line);) s += "  " + line + "\n";
    }
    s += "\n";
  }
  return s;
}

std::string config_reference_markdown() {
  std::string s =
      "# Config reference\n\n"
      "Every key of a params file, as zoo declares it: type, default and what it does. Generated by "
      "`zoo --help-config=markdown` from the schema, where each key is declared once; "
      "`scripts/gen_config_reference.sh` writes this file, and the test suite fails when it differs from what zoo "
      "prints. modelzoo's Trainer format is read into these same keys (docs/modelzoo.md); keys that only apply to "
      "Cerebras hardware are accepted with a warning.\n";
  for (const SchemaSection& sec : schema_sections()) {
    s += "\n## " + sec.heading + "\n\n";
    if (!sec.doc.empty()) s += sec.doc + "\n\n";
    s += "| key | type | default | |\n|---|---|---|---|\n";
    for (const auto& f : sec.fields)
      s += "| `" + f.key + "` | " + cell(f.type) + " | `" + (f.default_text.empty() ? "\"\"" : cell(f.default_text)) +
           "` | " + cell(f.doc) + " |\n";
    if (!sec.notes.empty()) s += "\n```text\n" + sec.notes + "```\n";
  }
  return s;
}

}  // namespace zoo
