// Activation checkpointing: a block whose activations are not kept for the
// backward pass but computed again there, trading ~1/3 more compute for the
// memory of everything inside the block. Defines: recompute_in_backward,
// recompute_outputs_in_backward, recompute_with_inputs_in_backward.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace zoo::models {

// block(x), keeping only x. The backward pass runs block again with the
// random-number state (dropout) and autocast settings of the forward pass,
// so gradients equal those of block(x) run plainly; gradients of the
// parameters inside the block accumulate into their .grad as usual.
torch::Tensor recompute_in_backward(const std::function<torch::Tensor(const torch::Tensor&)>& block,
                                    const torch::Tensor& x);

// The same for a block with several outputs (a layer and its router
// statistics): gradients flow back from each output that has one.
std::vector<torch::Tensor> recompute_outputs_in_backward(
    const std::function<std::vector<torch::Tensor>(const torch::Tensor&)>& block, const torch::Tensor& x);

// The same for a block of several inputs, inputs[0] the activation (its
// device's generator is replayed) and the others, e.g. an encoder's output
// or a position bias, shared with other blocks: each input that requires a
// gradient gets its part of it through this node, so a tensor used by many
// recomputed blocks is back-propagated once. Inputs may be undefined.
std::vector<torch::Tensor> recompute_with_inputs_in_backward(
    const std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)>& block,
    const std::vector<torch::Tensor>& inputs);

}  // namespace zoo::models
