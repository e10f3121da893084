// Implementation of models/dpo/dpo.h.
#include "models/dpo/dpo.h"

#include <algorithm>

#include "configs/schema/yaml_util.h"

namespace zoo::models {

const config::Schema<DpoParameters>& DpoParameters::schema() {
  using P = DpoParameters;
  static const config::Schema<P> s =
      config::Schema<P>("model.dpo", "DPO's loss.")
          .field("beta", &P::beta, "Inverse temperature of the implicit reward beta * log(policy / reference).",
                 config::positive<double>())
          .field("reference_free", &P::reference_free,
                 "No reference model: its log-ratio is taken as 0 (every response equally likely).")
          .field("loss_type", &P::loss_type,
                 "sigmoid (DPO), hinge (SLiC), ipo (IPO, on averaged log-likelihoods) "
                 "or dpop (DPO-Positive).",
                 config::one_of({"sigmoid", "hinge", "ipo", "dpop"}))
          .field("disable_dropout", &P::disable_dropout,
                 "Run the policy and the reference without dropout (its *dropout_rate keys become 0).")
          .field("dpop_penalty_weight", &P::dpop_penalty_weight,
                 "DPOP's lambda: weight of the penalty for a chosen response the policy likes less than the "
                 "reference does (loss_type dpop).",
                 config::non_negative<double>())
          .validate([](const P& p, const auto& fail) {
            if (p.loss_type == "dpop" && p.reference_free)
              fail("loss_type", "dpop penalizes the policy against the reference model, which reference_free removes");
          });
  return s;
}

const config::Schema<DpoOptions>& DpoOptions::schema() {
  using O = DpoOptions;
  static const config::Schema<O> s =
      config::Schema<O>("model (dpo)",
                        "DPO: `policy_model` (a decoder's model section with its `name`; legacy files give its keys "
                        "here with `model_name`), `dpo` and compute_eval_metrics.")
          .field("dpo", &O::dpo, "DPO's parameters (required).")
          .field("compute_eval_metrics", &O::compute_eval_metrics,
                 "Eval reports rewards_{chosen,rejected,accuracies,margins} and logps_{chosen,rejected}.");
  return s;
}

torch::Tensor dpo_losses(const torch::Tensor& policy_chosen, const torch::Tensor& policy_rejected,
                         const torch::Tensor& reference_chosen, const torch::Tensor& reference_rejected,
                         const DpoParameters& p) {
  torch::Tensor z = policy_chosen - policy_rejected;
  if (!p.reference_free) z = z - (reference_chosen - reference_rejected);
  if (p.loss_type == "hinge") return torch::relu(1.0 - p.beta * z);
  if (p.loss_type == "ipo") return (z - 1.0 / (2.0 * p.beta)).pow(2);
  if (p.loss_type == "dpop") z = z - p.dpop_penalty_weight * torch::clamp_min(reference_chosen - policy_chosen, 0.0);
  return -torch::log_sigmoid(p.beta * z);
}

namespace {

// modelzoo's wrapper module: its `model` attribute gives the keys their "model." part.
struct ModelzooWrapper : torch::nn::Module {
  explicit ModelzooWrapper(std::shared_ptr<Model> model) { register_module("model", std::move(model)); }
};

const char* const kPolicyPrefix = "policy_model.model.";
const char* const kReferencePrefix = "ref_model.model.";

// What DpoHDF5DataProcessor yields.
const std::vector<std::string>& pair_features() {
  static const std::vector<std::string> names = {"chosen_input_ids",   "chosen_attention_mask",   "chosen_labels",
                                                 "rejected_input_ids", "rejected_attention_mask", "rejected_labels"};
  return names;
}

}  // namespace

DpoModel::DpoModel(const DpoOptions& options, std::shared_ptr<Model> policy, std::shared_ptr<Model> reference)
    : options_(options), policy_(std::move(policy)), reference_(std::move(reference)) {
  register_module("policy_model", std::make_shared<ModelzooWrapper>(policy_));
  if (!reference_) return;
  register_module("ref_model", std::make_shared<ModelzooWrapper>(reference_));
  for (auto& p : reference_->parameters()) p.set_requires_grad(false);
  copy_policy_to_reference();
  reference_->eval();
}

void DpoModel::copy_policy_to_reference() {
  if (!reference_) return;
  torch::NoGradGuard no_grad;
  auto from = policy_->named_parameters(), to = reference_->named_parameters();
  for (const auto& p : from) to[p.key()].copy_(p.value());
  auto from_b = policy_->named_buffers(), to_b = reference_->named_buffers();
  for (const auto& b : from_b) to_b[b.key()].copy_(b.value());
}

void DpoModel::reset_parameters() {
  policy_->reset_parameters();
  copy_policy_to_reference();
}

void DpoModel::train(bool on) {
  Model::train(on);
  if (reference_) reference_->eval();  // a fixed scorer: no dropout, no training-only terms
}

double DpoModel::forward_flops_per_token() const {
  const double policy = 2 * policy_->forward_flops_per_token();  // chosen and rejected
  return reference_ ? policy + policy / 3 : policy;
}

ModelOutput DpoModel::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor& chosen_ids = batch.at("chosen_input_ids");
  const int64_t B = chosen_ids.size(0), T = chosen_ids.size(1);
  // Pair i's responses are rows 2i and 2i + 1 of one batch, as modelzoo stacks them.
  auto both = [&](const std::string& feature) {
    return torch::stack({batch.at("chosen_" + feature), batch.at("rejected_" + feature)}, 1).view({2 * B, T});
  };
  const Features responses = {
      {"input_ids", both("input_ids")}, {"attention_mask", both("attention_mask")}, {"labels", both("labels")}};
  const DpoParameters& p = options_.dpo;
  const bool average = p.loss_type == "ipo";
  const torch::Tensor policy = policy_->label_log_likelihood(responses, average).view({B, 2});
  const torch::Tensor policy_chosen = policy.select(1, 0), policy_rejected = policy.select(1, 1);
  torch::Tensor reference_chosen, reference_rejected;
  if (reference_) {
    torch::NoGradGuard no_grad;
    const torch::Tensor reference = reference_->label_log_likelihood(responses, average).view({B, 2});
    reference_chosen = reference.select(1, 0);
    reference_rejected = reference.select(1, 1);
  }
  ModelOutput out;
  out.loss = dpo_losses(policy_chosen, policy_rejected, reference_chosen, reference_rejected, p).mean();
  if (!with_metrics || !options_.compute_eval_metrics) return out;
  torch::NoGradGuard no_grad;
  const torch::Tensor one = torch::ones({}, policy.options());
  auto batch_mean = [&](const torch::Tensor& v) { return MetricTerm{v.mean(), one, MetricTerm::Reduce::mean}; };
  if (reference_) {
    const torch::Tensor chosen = p.beta * (policy_chosen - reference_chosen);
    const torch::Tensor rejected = p.beta * (policy_rejected - reference_rejected);
    out.metrics["rewards_chosen"] = batch_mean(chosen);
    out.metrics["rewards_rejected"] = batch_mean(rejected);
    out.metrics["rewards_accuracies"] = batch_mean((chosen > rejected).to(chosen.scalar_type()));
    out.metrics["rewards_margins"] = batch_mean(chosen - rejected);
  }
  out.metrics["logps_chosen"] = batch_mean(policy_chosen.detach());
  out.metrics["logps_rejected"] = batch_mean(policy_rejected.detach());
  return out;
}

std::map<std::string, torch::Tensor> DpoModel::adapt_loaded_state(std::map<std::string, torch::Tensor> saved) const {
  const bool dpo_checkpoint = std::any_of(saved.begin(), saved.end(), [](const auto& kv) {
    return kv.first.rfind("policy_model.", 0) == 0 || kv.first.rfind("ref_model.", 0) == 0;
  });
  if (dpo_checkpoint) return saved;
  std::map<std::string, torch::Tensor> both;
  for (const auto& [key, tensor] : saved) {
    both[kPolicyPrefix + key] = tensor;
    if (reference_) both[kReferencePrefix + key] = tensor;
  }
  return both;
}

namespace {

// The dpo section parsed: its own options and its policy's spec.
class DpoSpec : public ModelSpec {
 public:
  DpoSpec(const YAML::Node& section, const config::Context& ctx) {
    YAML::Node own(YAML::NodeType::Map), policy(YAML::NodeType::Map), policy_section;
    // modelzoo's legacy layout gives the policy's keys beside dpo's, naming it by model_name.
    const bool nested = section["policy_model"].IsDefined();
    YAML::Node name_node;
    bool named = false;
    for (const auto& kv : section) {
      const std::string key = kv.first.as<std::string>();
      if (key == "policy_model") policy_section = kv.second;
      else if (nested || key == "dpo" || key == "compute_eval_metrics") own[kv.first] = kv.second;
      else if (key == "model_name") name_node = kv.second, named = true;
      else policy[kv.first] = kv.second;
    }
    if (!section["dpo"]) ctx.fail(section, "dpo", "required: DPO's parameters, e.g. {beta: 0.1}");
    options_ = DpoOptions::schema().parse(own, ctx);
    config::Context policy_ctx = ctx;
    if (nested) {
      policy_ctx = ctx.child("policy_model");
      if (!policy_section.IsMap())
        ctx.fail(policy_section, "policy_model", "expected the policy decoder's model section, with its name");
      for (const auto& kv : policy_section) {
        if (kv.first.as<std::string>() == "name") name_node = kv.second, named = true;
        else policy[kv.first] = kv.second;
      }
    }
    const char* name_key = nested ? "name" : "model_name";
    if (!named)
      (nested ? policy_ctx : ctx)
          .fail(nested ? policy_section : section, name_key,
                "required: the family of the decoder DPO trains, e.g. mistral, llama or gpt2");
    const std::string name = config::Value<std::string>::parse(name_node, policy_ctx, name_key);
    try {
      family_ = &find_model(name);
    } catch (const std::invalid_argument& e) {
      policy_ctx.fail(name_node, name_key, e.what());
    }
    if (family_->name == "dpo") policy_ctx.fail(name_node, name_key, "the policy must be a decoder, not a dpo model");
    family_name_ = name;
    if (options_.dpo.disable_dropout)
      for (const config::FieldInfo& field : family_->fields) {
        const std::string& k = field.key;
        if (k.size() >= 12 && k.compare(k.size() - 12, 12, "dropout_rate") == 0 && k.find('.') == std::string::npos)
          policy[k] = 0.0;
      }
    policy_ = family_->parse(policy, policy_ctx);
    if (!policy_->build(torch::TensorOptions().device(torch::kMeta))->is_causal_lm())
      policy_ctx.fail(name_node, name_key,
                      "DPO trains a causal decoder (gpt2, llama, mistral, gptj, falcon, ...); " + name + " is not one");
    origin_ = policy_->origin();
  }

  YAML::Node to_yaml() const override {
    YAML::Node out = DpoOptions::schema().to_yaml(options_);
    YAML::Node policy(YAML::NodeType::Map);
    policy["name"] = family_name_;
    for (const auto& kv : policy_->to_yaml()) policy[kv.first] = kv.second;
    out["policy_model"] = policy;
    return out;
  }
  std::shared_ptr<Model> build(const torch::TensorOptions& param_options) const override {
    std::shared_ptr<Model> reference;
    // The reference is the policy's copy (DpoModel copies it): initializing it first would be wasted work.
    if (!options_.dpo.reference_free) reference = policy_->build_uninitialized(param_options);
    return std::make_shared<DpoModel>(options_, policy_->build(param_options), std::move(reference));
  }
  std::vector<std::string> consumes() const override { return pair_features(); }
  std::optional<int64_t> max_sequence_length() const override { return policy_->max_sequence_length(); }
  std::optional<Part> exported_part() const override { return Part{policy_, kPolicyPrefix}; }

 private:
  DpoOptions options_;
  const ModelFamily* family_ = nullptr;
  std::string family_name_;
  std::shared_ptr<const ModelSpec> policy_;
};

}  // namespace

ModelFamily dpo_family() {
  ModelFamily f;
  f.name = "dpo";
  f.doc =
      "DPO: preference optimization of a decoder (policy_model: any causal-LM family) against a frozen "
      "reference copy, as modelzoo's dpo model; data: DpoHDF5DataProcessor.";
  f.consumes = pair_features();
  f.parse = [](const YAML::Node& section, const config::Context& ctx) {
    return std::make_shared<const DpoSpec>(section, ctx);
  };
  f.fields = DpoOptions::schema().describe();
  f.fields.push_back({"policy_model", "mapping", "required",
                      "The decoder to train: its family's model section, with `name` (e.g. mistral)."});
  // Legacy sections hold the policy's keys too: the policy's family checks them.
  f.accepts_key = [](const std::string&) { return true; };
  f.required_keys = {"dpo"};
  return f;
}

}  // namespace zoo::models
