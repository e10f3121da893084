// Implementation of models/common/recompute.h as a custom autograd node that
// runs the block again inside its backward (the "reentrant" scheme).
#include "models/common/recompute.h"

#include "models/kernels/autocast_state.h"

namespace zoo::models {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Block : torch::CustomClassHolder {
  std::function<variable_list(const variable_list&)> run;
  at::Generator generator;  // the one dropout draws from on the inputs' device
  torch::Tensor rng_state;
  AutocastState cpu_autocast, cuda_autocast;
  std::vector<bool> needs_grad;  // per input
};

class Recompute : public torch::autograd::Function<Recompute> {
 public:
  // Every tensor of `inputs` is an input of this node, so each gets its gradient once.
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs, c10::intrusive_ptr<Block> block) {
    const torch::Tensor& x = inputs.front();
    block->generator =
        x.is_cuda() ? at::globalContext().defaultGenerator(x.device()) : at::detail::getDefaultCPUGenerator();
    block->rng_state = block->generator.get_state();
    block->cpu_autocast = AutocastState::of(torch::kCPU);
    block->cuda_autocast = AutocastState::of(torch::kCUDA);
    for (const auto& t : inputs) block->needs_grad.push_back(t.requires_grad());
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data["block"] = c10::IValue::make_capsule(block);
    torch::NoGradGuard no_grad;
    return block->run(inputs.vec());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto block = c10::static_intrusive_pointer_cast<Block>(ctx->saved_data["block"].toCapsule());
    variable_list inputs = ctx->get_saved_variables();
    for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = inputs[i].detach().requires_grad_(block->needs_grad[i]);
    // Replay the forward's random draws and precision, then put back today's.
    const torch::Tensor rng_now = block->generator.get_state();
    const AutocastState cpu_now = AutocastState::of(torch::kCPU), cuda_now = AutocastState::of(torch::kCUDA);
    block->generator.set_state(block->rng_state);
    block->cpu_autocast.apply();
    block->cuda_autocast.apply();
    variable_list y;
    {
      torch::AutoGradMode grad(true);
      y = block->run(inputs);
    }
    block->generator.set_state(rng_now);
    cpu_now.apply();
    cuda_now.apply();
    variable_list outputs, grads;  // those a gradient flows back from
    for (size_t i = 0; i < y.size(); ++i)
      if (y[i].requires_grad() && grad_outputs[i].defined()) outputs.push_back(y[i]), grads.push_back(grad_outputs[i]);
    if (!outputs.empty()) torch::autograd::backward(outputs, grads);
    variable_list input_grads;
    for (size_t i = 0; i < inputs.size(); ++i)
      input_grads.push_back(block->needs_grad[i] ? inputs[i].grad() : torch::Tensor());
    input_grads.push_back(torch::Tensor());  // the block
    return input_grads;
  }
};

}  // namespace

std::vector<torch::Tensor> recompute_with_inputs_in_backward(
    const std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)>& block,
    const std::vector<torch::Tensor>& inputs) {
  // The node takes the defined inputs only; the block sees undefined ones where they were.
  std::vector<size_t> slots;
  variable_list defined;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined()) slots.push_back(i), defined.push_back(inputs[i]);
  // Below a frozen part of the model (LoRA's base) the activation has no
  // gradient, yet the block's own parameters may train: the node's backward
  // runs only when an input asks for a gradient, so the activation asks for one.
  if (torch::GradMode::is_enabled() && !defined.front().requires_grad())
    defined.front() = defined.front().detach().requires_grad_(true);
  auto holder = c10::make_intrusive<Block>();
  holder->run = [block, slots, n = inputs.size()](const variable_list& in) {
    variable_list all(n);
    for (size_t k = 0; k < slots.size(); ++k) all[slots[k]] = in[k];
    return block(all);
  };
  return Recompute::apply(at::TensorList(defined), holder);
}

std::vector<torch::Tensor> recompute_outputs_in_backward(
    const std::function<std::vector<torch::Tensor>(const torch::Tensor&)>& block, const torch::Tensor& x) {
  return recompute_with_inputs_in_backward([block](const variable_list& in) { return block(in[0]); }, {x});
}

torch::Tensor recompute_in_backward(const std::function<torch::Tensor(const torch::Tensor&)>& block,
                                    const torch::Tensor& x) {
  return recompute_outputs_in_backward([block](const torch::Tensor& h) { return variable_list{block(h)}; }, x)[0];
}

}  // namespace zoo::models
