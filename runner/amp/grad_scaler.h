// Loss scaling for reduced-precision training, with the semantics of
// modelzoo's (cerebras_pytorch) GradScaler: the update is skipped when the
// unscaled gradients' global norm is not finite; any overflow halves the
// scale; after more than steps_per_increase clean steps it doubles; the scale
// is clamped to [min, max]. Static scaling is the same with no changes.
// Defines: GradScalerOptions, make_grad_scaler, GradScaler.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <vector>

#include "runner/optim/optimizer_config.h"

namespace zoo::amp {

struct GradScalerOptions {
  bool dynamic = true;
  double initial_scale = 32768.0;  // 2^15
  int64_t steps_per_increase = 2000;
  double min_scale = 1.0 / 16384;  // 2^-14
  double max_scale = 32768.0;      // 2^15
};

class GradScaler;
// A scaler when the optimizer section asks for loss scaling (nullptr when
// not, and with bfloat16, which has float32's range and needs none).
std::unique_ptr<GradScaler> make_grad_scaler(const OptimizerConfig& optimizer, std::optional<torch::ScalarType> dtype);

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& options);
  torch::Tensor scale(const torch::Tensor& loss) const { return loss * scale_; }
  // Divides every gradient by the scale; true when their global L2 norm is finite.
  bool unscale(const std::vector<torch::Tensor>& params) const;
  // Records one step's outcome and adjusts the scale (dynamic only).
  void update(bool finite);
  double current_scale() const { return scale_; }
  // {loss_scale, steps_since_rescale, overflows_since_rescale}
  c10::impl::GenericDict state_dict() const;
  void load_state_dict(const c10::impl::GenericDict& dict);

 private:
  GradScalerOptions options_;
  double scale_;
  int64_t steps_ = 0;
  int64_t overflows_ = 0;
};

}  // namespace zoo::amp
