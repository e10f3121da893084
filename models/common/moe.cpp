// Implementation of models/common/moe.h.
#include "models/common/moe.h"

namespace zoo::models {

const config::Schema<MoeOptions>& MoeOptions::schema() {
  using O = MoeOptions;
  auto nonlinearity = config::if_set(config::one_of({"softmax", "sigmoid", "sinkhorn"}));
  static const config::Schema<O> s =
      config::Schema<O>("moe", "Mixture of experts in place of each decoder layer's FFN (Mixtral).")
          .field("num_experts", &O::num_experts,
                 "Routed experts per layer; MoE is on when they and the shared experts number more than 1.",
                 config::non_negative<int64_t>())
          .field("num_shared_experts", &O::num_shared_experts,
                 "Experts every token goes through, weight 1, beside the routed ones (learned routing only).",
                 config::if_set(config::positive<int64_t>()))
          .field("top_k", &O::top_k, "Experts each token is routed to.", config::positive<int64_t>())
          .field("load_balancing_loss_coef", &O::load_balancing_loss_coef,
                 "Weight of the load-balancing loss added to the training loss.", config::non_negative<double>())
          .field("null_expert_bias", &O::null_expert_bias,
                 "Added to the top-k probabilities' sum before they are normalized (a 'null expert').")
          .field("moe_implementation", &O::moe_implementation,
                 "modelzoo's kernel choice; zoo computes the same function for each and keeps the functional "
                 "checkpoint layout (ffn.experts.experts.{i}).",
                 config::one_of({"functional", "optimized", "experimental", "forge_experimental", "expert_parallel"}))
          .field("router_use_bias", &O::router_use_bias, "A bias in the router (ffn.gate).")
          .field("router_fp32", &O::router_fp32, "Router logits and probabilities in float32 under mixed precision.")
          .field("routing_algorithm", &O::routing_algorithm,
                 "learned: the router; hash: expert = token id % num_experts; uniform: expert = (position + k) % "
                 "num_experts.",
                 config::one_of({"learned", "hash", "uniform"}))
          .field("router_selection_nonlinearity", &O::router_selection_nonlinearity,
                 "Router logits -> the probabilities that pick the top-k experts.", nonlinearity)
          .field("expert_weighting_nonlinearity", &O::expert_weighting_nonlinearity,
                 "Router logits -> the weights of the picked experts' outputs.", nonlinearity)
          .field("expert_weighting_normalization", &O::expert_weighting_normalization,
                 "Divide the picked experts' weights by their sum (plus null_expert_bias).")
          .field("sinkhorn_n_iters", &O::sinkhorn_n_iters, "sinkhorn: normalization rounds.",
                 config::if_set(config::positive<int64_t>()))
          .field("gate_initializer", &O::gate_initializer,
                 "Router weights (null: the model's `initializer`, else truncated_normal(initializer_range)).")
          .field("probability_before_ffn", &O::probability_before_ffn,
                 "Weight each expert's input instead of its output.")
          .validate([](const O& o, const auto& fail) {
            if (o.routing_algorithm != "learned" && o.load_balancing_loss_coef > 0)
              fail("load_balancing_loss_coef",
                   "is for learned routing only (routing_algorithm is " + o.routing_algorithm + ")");
            if (o.routing_algorithm == "hash" && o.enabled() && o.top_k != 1)
              fail("top_k", "must be 1 with hash routing");
            if (o.num_shared_experts && o.routing_algorithm != "learned")
              fail("num_shared_experts", "works with learned routing only");
            if (o.null_expert_bias.value_or(0.0) != 0.0 && !o.expert_weighting_normalization.value_or(false))
              fail("null_expert_bias", "needs expert_weighting_normalization: true");
            if (o.router_selection_nonlinearity == "sinkhorn" && o.load_balancing_loss_coef != 0)
              fail("load_balancing_loss_coef", "is not supported with the sinkhorn router_selection_nonlinearity");
            if (o.enabled() && o.top_k > o.num_experts)
              fail("top_k", "expected 1 .. num_experts (" + std::to_string(o.num_experts) + ")");
          });
  return s;
}

void MoeContext::record(const torch::Tensor& tokens, const torch::Tensor& probs) {
  tokens_per_expert = layers ? tokens_per_expert + tokens : tokens;
  prob_per_expert = layers ? prob_per_expert + probs : probs;
  ++layers;
}

torch::Tensor load_balancing_loss(const MoeContext& c, int64_t num_experts) {
  const double n = double(c.layers);
  return double(num_experts * num_experts) * (c.tokens_per_expert / n * (c.prob_per_expert / n)).mean();
}

SparseMoeBlockImpl::SparseMoeBlockImpl(const MoeOptions& moe, const FeedForwardOptions& expert,
                                       const InitializerSpec& gate_initializer, const torch::TensorOptions& p)
    : options_(moe), gate_initializer_(gate_initializer) {
  gate = register_module("gate", Dense(expert.input_size, moe.num_experts, moe.router_use_bias.value_or(false), p));
  auto holder = register_module("experts", std::make_shared<torch::nn::Module>());
  experts = holder->register_module("experts", torch::nn::ModuleList());
  for (int64_t i = 0; i < moe.num_experts + moe.shared_experts(); ++i) experts->push_back(FeedForward(expert, p));
}

void SparseMoeBlockImpl::reset_parameters() {
  gate->reset_parameters(gate_initializer_);
  for (auto& e : *experts) e->as<FeedForwardImpl>()->reset_parameters();
}

namespace {

torch::Tensor sinkhorn(torch::Tensor r, int64_t rounds) {  // (B, T, E) logits; rows over experts, then over tokens
  for (int64_t i = 0; i < rounds; ++i) {
    r = r - torch::logsumexp(r, 2, true);
    r = r - torch::logsumexp(r, 1, true);
  }
  return r.exp();
}

torch::Tensor router_nonlinearity(const std::string& name, const torch::Tensor& logits, int64_t sinkhorn_rounds) {
  if (name == "sigmoid") return torch::sigmoid(logits);
  if (name == "sinkhorn") {
    torch::NoGradGuard no_grad;  // as modelzoo's: no gradient through the balancing
    return sinkhorn(logits.detach(), sinkhorn_rounds);
  }
  return torch::softmax(logits, -1);
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> SparseMoeBlockImpl::route(const torch::Tensor& x, const MoeContext* context) {
  const int64_t E = options_.num_experts, K = options_.top_k;
  const auto as_probs = [&](const torch::Tensor& one_hot) { return one_hot.to(torch::kFloat); };
  if (options_.routing_algorithm == "hash") {
    if (!context || !context->input_ids.defined()) throw std::logic_error("hash routing needs the batch's input_ids");
    torch::Tensor p = as_probs(torch::one_hot(context->input_ids.remainder(E), E));
    return {p, p};
  }
  if (options_.routing_algorithm == "uniform") {  // token t goes to experts (t + k) % E, k < K
    const int64_t first = context ? context->first_position : 0;
    torch::Tensor t =
        torch::arange(first, first + x.size(1), torch::TensorOptions().dtype(torch::kLong).device(x.device()));
    torch::Tensor idx = (t.unsqueeze(-1) + torch::arange(K, t.options())).remainder(E);  // (T, K)
    torch::Tensor p = as_probs(torch::one_hot(idx, E)).sum(-2).div(double(K)).expand({x.size(0), -1, -1});
    return {p, p};
  }
  torch::Tensor logits = gate(x);
  if (options_.router_fp32) logits = logits.to(torch::kFloat);
  const std::string select = options_.router_selection_nonlinearity.value_or("softmax");
  const std::string weigh = options_.expert_weighting_nonlinearity.value_or("softmax");
  const int64_t rounds = options_.sinkhorn_n_iters.value_or(1);
  torch::Tensor probs = router_nonlinearity(select, logits, rounds);
  return {probs, weigh == select ? probs : router_nonlinearity(weigh, logits, rounds)};
}

torch::Tensor SparseMoeBlockImpl::forward(const torch::Tensor& x, MoeContext* context) {
  const int64_t E = options_.num_experts, C = x.size(-1);
  auto [probs, weights] = route(x, context);               // (B, T, E)
  auto [top_probs, top_idx] = probs.topk(options_.top_k);  // (B, T, K)
  torch::Tensor top_weights = weights.is_same(probs) ? top_probs : weights.gather(-1, top_idx);
  if (options_.expert_weighting_normalization.value_or(false))
    top_weights = top_weights / (top_weights.sum(-1, true) + options_.null_expert_bias.value_or(0.0));
  if (context && context->token_weights.defined()) {
    torch::Tensor w = context->token_weights.to(probs.scalar_type()).unsqueeze(-1);     // (B, T, 1)
    torch::Tensor picked = torch::one_hot(top_idx, E).sum(-2).to(probs.scalar_type());  // (B, T, E)
    context->record((picked * w).sum(1), (probs * w).sum(1));
  }
  // Tokens as rows; each expert gathers its rows, and its weighted output is added back at them.
  torch::Tensor rows_in = x.reshape({-1, C});
  torch::Tensor idx = top_idx.reshape({rows_in.size(0), -1});
  torch::Tensor wt = top_weights.reshape({rows_in.size(0), -1}).to(x.scalar_type());
  torch::Tensor out = torch::zeros_like(rows_in);
  for (int64_t e = 0; e < E; ++e) {
    // Experts no token picked still run (on no rows), so every parameter gets a gradient.
    torch::Tensor hit = (idx == e).nonzero();  // (n, 2): row, slot
    torch::Tensor rows = hit.select(1, 0), w = wt.index({rows, hit.select(1, 1)}).unsqueeze(-1);
    torch::Tensor in = rows_in.index_select(0, rows);
    auto* expert = experts[e]->as<FeedForwardImpl>();
    torch::Tensor y = options_.probability_before_ffn ? expert->forward(in * w) : expert->forward(in) * w;
    out = out.index_add(0, rows, y.to(out.scalar_type()));  // autocast: experts may compute in half
  }
  for (int64_t s = E; s < int64_t(experts->size()); ++s)
    out = out + experts[s]->as<FeedForwardImpl>()->forward(rows_in).to(out.scalar_type());
  return out.view(x.sizes());
}

}  // namespace zoo::models
