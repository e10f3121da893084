// Rotary position embeddings (RoPE) with the position scalings modelzoo
// offers for long contexts: linear interpolation, Llama 3.1's
// frequency-banded scaling and YaRN. Defines: RotaryOptions,
// rotary_inverse_frequencies, apply_rotary.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace zoo::models {

struct RotaryOptions {
  int64_t dim = 0;        // dims per head rotated; 0: no rotary embedding
  double base = 10000.0;  // modelzoo's rope_theta
  // modelzoo's pos_scaling_type / pos_scaling_factor / pos_scaling_extra_args.
  std::string scaling_type = "linear";  // linear (positions / factor), llama3 or yarn
  double scaling_factor = 1.0;
  int64_t original_max_position_embeddings = 8192;       // llama3 and yarn: the pre-trained context
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  double beta_fast = 32.0, beta_slow = 1.0;              // yarn: rotations bounding the blended band
  double extrapolation_factor = 1.0, mscale_a = 0.1, mscale_b = 1.0;
  bool truncate = true;  // yarn: round the band's bounds to whole dims
};

// Per pair of rotated dims j (0 <= j < dim/2): base^(-2j/dim), rescaled as
// the scaling type says (linear scales positions instead). float32 (as
// modelzoo and Hugging Face compute them), (dim/2), on `device`: no copy
// from the host inside a step.
torch::Tensor rotary_inverse_frequencies(const RotaryOptions& o, const torch::Device& device = torch::kCPU);

// Rotates the first o.dim dims of each head in modelzoo's interleaved layout:
// dims (2j, 2j+1) by position * inverse frequency j (times YaRN's magnitude
// scale). x: (B, T, heads, D), positions start at `first_position`.
torch::Tensor apply_rotary(const torch::Tensor& x, const RotaryOptions& o, int64_t first_position);
// The same with each token's own position: positions (B, T) integers (rows
// that pack several sequences, each numbered from 0).
torch::Tensor apply_rotary(const torch::Tensor& x, const RotaryOptions& o, const torch::Tensor& positions);

}  // namespace zoo::models
