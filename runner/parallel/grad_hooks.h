// A call after autograd has accumulated a backward pass's gradient into a
// parameter: what data parallelism (gradient buckets) and full sharding
// (a unit's reduce-scatter) start their communication from. Internal to
// runner/; includes autograd's own headers. Defines: after_accumulation.
#pragma once

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/torch.h>

#include <functional>
#include <memory>

namespace zoo {

// Hooks `fn` onto `parameter`'s gradient accumulator and returns the
// accumulator, which the caller keeps: a leaf holds it only weakly, and
// the hook would vanish with it.
inline std::shared_ptr<torch::autograd::Node> after_accumulation(const torch::Tensor& parameter,
                                                                 std::function<void()> fn) {
  struct Hook : torch::autograd::FunctionPostHook {
    explicit Hook(std::function<void()> f) : fn(std::move(f)) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list&) override {
      fn();
      return outputs;
    }
    std::function<void()> fn;
  };
  auto accumulator = torch::autograd::impl::grad_accumulator(parameter);
  accumulator->add_post_hook(std::make_unique<Hook>(std::move(fn)));
  return accumulator;
}

}  // namespace zoo
