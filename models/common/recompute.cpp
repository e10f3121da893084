// Implementation of models/common/recompute.h as a custom autograd node that
// runs the block again inside its backward (the "reentrant" scheme).
#include "models/common/recompute.h"

#include "models/common/autocast_state.h"

namespace zoo::models {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Block : torch::CustomClassHolder {
  std::function<variable_list(const torch::Tensor&)> run;
  at::Generator generator;  // the one dropout draws from on x's device
  torch::Tensor rng_state;
  AutocastState cpu_autocast, cuda_autocast;
};

class Recompute : public torch::autograd::Function<Recompute> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, c10::intrusive_ptr<Block> block) {
    block->generator = x.is_cuda() ? at::globalContext().defaultGenerator(x.device())
                                   : at::detail::getDefaultCPUGenerator();
    block->rng_state = block->generator.get_state();
    block->cpu_autocast = AutocastState::of(torch::kCPU);
    block->cuda_autocast = AutocastState::of(torch::kCUDA);
    ctx->save_for_backward({x});
    ctx->saved_data["block"] = c10::IValue::make_capsule(block);
    torch::NoGradGuard no_grad;
    return block->run(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto block = c10::static_intrusive_pointer_cast<Block>(ctx->saved_data["block"].toCapsule());
    torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    // Replay the forward's random draws and precision, then put back today's.
    const torch::Tensor rng_now = block->generator.get_state();
    const AutocastState cpu_now = AutocastState::of(torch::kCPU), cuda_now = AutocastState::of(torch::kCUDA);
    block->generator.set_state(block->rng_state);
    block->cpu_autocast.apply();
    block->cuda_autocast.apply();
    variable_list y;
    {
      torch::AutoGradMode grad(true);
      y = block->run(x);
    }
    block->generator.set_state(rng_now);
    cpu_now.apply();
    cuda_now.apply();
    variable_list outputs, grads;  // those a gradient flows back from
    for (size_t i = 0; i < y.size(); ++i)
      if (y[i].requires_grad() && grad_outputs[i].defined()) outputs.push_back(y[i]), grads.push_back(grad_outputs[i]);
    if (!outputs.empty()) torch::autograd::backward(outputs, grads);
    return {x.grad(), torch::Tensor()};
  }
};

}  // namespace

std::vector<torch::Tensor> recompute_outputs_in_backward(
    const std::function<std::vector<torch::Tensor>(const torch::Tensor&)>& block, const torch::Tensor& x) {
  auto holder = c10::make_intrusive<Block>();
  holder->run = block;
  return Recompute::apply(x, holder);
}

torch::Tensor recompute_in_backward(const std::function<torch::Tensor(const torch::Tensor&)>& block,
                                    const torch::Tensor& x) {
  return recompute_outputs_in_backward([block](const torch::Tensor& h) { return variable_list{block(h)}; }, x)[0];
}

}  // namespace zoo::models
