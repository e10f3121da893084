// Implementation of models/common/rotary.h. The scalings follow the
// published definitions (Llama 3.1's and YaRN's, as Hugging Face's
// modeling_rope_utils and modelzoo's RotaryPositionEmbeddingHelper compute them).
#include "models/common/rotary.h"

#include <algorithm>
#include <cmath>

namespace zoo::models {
namespace {

// YaRN: the dim index at which a frequency makes `rotations` turns over the original context.
double yarn_correction_dim(double rotations, const RotaryOptions& o) {
  return o.dim * std::log(o.original_max_position_embeddings / (rotations * 2 * M_PI)) / (2 * std::log(o.base));
}

}  // namespace

torch::Tensor rotary_inverse_frequencies(const RotaryOptions& o, const torch::Device& device) {
  const torch::Tensor pair = torch::arange(0, o.dim / 2, torch::TensorOptions().dtype(torch::kFloat).device(device));
  torch::Tensor inv_freq = torch::pow(o.base, -2.0 * pair / double(o.dim));
  if (o.scaling_type == "llama3") {
    // Long wavelengths (beyond original / low_freq_factor) slow down by the
    // factor, short ones (below original / high_freq_factor) stay, and the
    // band between blends the two.
    const double low_wavelen = o.original_max_position_embeddings / o.low_freq_factor;
    const double high_wavelen = o.original_max_position_embeddings / o.high_freq_factor;
    const torch::Tensor wavelen = 2 * M_PI / inv_freq;
    const torch::Tensor smooth =
        (o.original_max_position_embeddings / wavelen - o.low_freq_factor) / (o.high_freq_factor - o.low_freq_factor);
    const torch::Tensor blended = (1 - smooth) * inv_freq / o.scaling_factor + smooth * inv_freq;
    inv_freq = torch::where(wavelen < high_wavelen, inv_freq,
                            torch::where(wavelen > low_wavelen, inv_freq / o.scaling_factor, blended));
  } else if (o.scaling_type == "yarn") {
    // High frequencies extrapolate, low ones interpolate (/ factor), with a
    // linear ramp over the dims between.
    double low = yarn_correction_dim(o.beta_fast, o), high = yarn_correction_dim(o.beta_slow, o);
    if (o.truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0);
    high = std::min(high, double(o.dim - 1));
    if (low == high) high += 0.001;  // no zero-width ramp
    const torch::Tensor ramp = ((pair - low) / (high - low)).clamp(0, 1);
    const torch::Tensor extrapolated = (1 - ramp) * o.extrapolation_factor;
    inv_freq = inv_freq / o.scaling_factor * (1 - extrapolated) + inv_freq * extrapolated;
  }
  return inv_freq;
}

namespace {
// x (B, T, heads, D) rotated by `positions`: float (T) for every row alike, or (B, T) per row.
torch::Tensor rotate(const torch::Tensor& x, const RotaryOptions& o, torch::Tensor positions) {
  const int64_t B = x.size(0), T = x.size(1), heads = x.size(2), R = o.dim;
  if (o.scaling_type == "linear" && o.scaling_factor != 1.0) positions = positions / o.scaling_factor;
  // (T, 1, R/2) or (B, T, 1, R/2): the same for every head.
  const torch::Tensor angle = (positions.unsqueeze(-1) * rotary_inverse_frequencies(o, x.device())).unsqueeze(-2);
  torch::Tensor cos = angle.cos(), sin = angle.sin();
  if (o.scaling_type == "yarn" && o.scaling_factor > 1) {  // YaRN's attention temperature, on q and k alike
    const double magnitude = o.mscale_a * std::log(o.scaling_factor) + o.mscale_b;
    cos = cos * magnitude, sin = sin * magnitude;
  }
  torch::Tensor rot = x.narrow(-1, 0, R).to(torch::kFloat);
  torch::Tensor pairs = rot.reshape({B, T, heads, R / 2, 2});
  // unbind: one autograd node whose backward stacks, not two selects that
  // each zero-fill a gradient the size of x
  const std::vector<torch::Tensor> even_odd = pairs.unbind(-1);
  const torch::Tensor &even = even_odd[0], &odd = even_odd[1];
  torch::Tensor out = torch::stack({even * cos - odd * sin, even * sin + odd * cos}, -1).flatten(-2);
  out = out.to(x.scalar_type());
  if (R == x.size(-1)) return out;
  return torch::cat({out, x.narrow(-1, R, x.size(-1) - R)}, -1);
}
}  // namespace

torch::Tensor apply_rotary(const torch::Tensor& x, const RotaryOptions& o, int64_t first_position) {
  return rotate(x, o,
                torch::arange(first_position, first_position + x.size(1),
                              torch::TensorOptions().dtype(torch::kFloat).device(x.device())));
}

torch::Tensor apply_rotary(const torch::Tensor& x, const RotaryOptions& o, const torch::Tensor& positions) {
  TORCH_CHECK(positions.dim() == 2 && positions.size(0) == x.size(0) && positions.size(1) == x.size(1),
              "apply_rotary: expected positions (B, T) matching x");
  return rotate(x, o, positions.to(x.device(), torch::kFloat));
}

}  // namespace zoo::models
