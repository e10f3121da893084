// Weight sparsity (modelzoo's `sparsity` section, cerebras.pytorch.sparse):
// a fixed fraction of each chosen weight is held at zero by a mask. Static
// masks stay as drawn; SET and RigL move them every `update.freq` steps,
// dropping the smallest-magnitude active weights and regrowing as many
// (SET: at random; RigL: where the dense gradient is largest).
// Defines: WeightSparsity (the settings: runner/sparsity_config.h).
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "runner/sparsity_config.h"

namespace zoo {

class WeightSparsity {
 public:
  // Picks the parameters param_filter names (an error when none match).
  WeightSparsity(const SparsityConfig& config, const torch::nn::Module& model, uint64_t seed);
  bool ready() const { return ready_; }
  // Draws the masks (init_method) and zeroes the weights outside them.
  void initialize();
  // Zeroes gradients outside the masks; on a RigL update step, first keeps
  // the dense gradient magnitudes the regrowth reads.
  void mask_gradients(int64_t step);
  // After the optimizer step `step`: moves the masks on an update step, then
  // zeroes the weights outside them (regrown weights start at zero).
  void after_step(int64_t step);
  double drop_fraction(int64_t step) const;
  bool is_update_step(int64_t step) const;
  // "sparsity: 75.0% of 1,234 weights in 4 tensors are zero"
  std::string summary() const;
  // The masks by parameter name and the regrowth generator's state.
  c10::impl::GenericDict state_dict() const;
  void load_state_dict(const c10::impl::GenericDict& state);

 private:
  struct Target {
    std::string name;
    torch::Tensor param;
    torch::Tensor mask;        // bool, as param
    torch::Tensor dense_grad;  // |grad| before masking, on RigL update steps
  };
  torch::Tensor random_scores(const torch::Tensor& like);
  void update_mask(Target& t, double fraction);

  SparsityConfig config_;
  std::vector<Target> targets_;
  at::Generator generator_;
  bool ready_ = false;
};

}  // namespace zoo
