// Implementation of data/image_transforms.h.
#include "data/image_transforms.h"

#include <cmath>
#include <stdexcept>

#include "data/image.h"
#include "data/splitmix.h"

namespace zoo::data {

namespace {
const std::vector<std::string> kTransforms = {
    "resize",    "center_crop", "random_resized_crop", "random_horizontal_flip", "random_vertical_flip",
    "to_tensor", "normalize",   "expand_to_square"};
}  // namespace

const config::Schema<TransformSpec>& TransformSpec::schema() {
  using S = TransformSpec;
  static const config::Schema<S> s =
      config::Schema<S>("transforms[] entry", "One torchvision transform of the input pipeline.")
          .field("name", &S::name,
                 "resize, center_crop, random_resized_crop, random_horizontal_flip, "
                 "random_vertical_flip, to_tensor, normalize or expand_to_square (modelzoo's other transforms are not "
                 "in zoo "
                 "yet).",
                 config::one_of(kTransforms))
          .field("size", &S::size, "[H, W], or one number (resize: the shorter side, keeping the aspect ratio).")
          .field("scale", &S::scale, "random_resized_crop: [min, max] share of the image area.")
          .field("ratio", &S::ratio, "random_resized_crop: [min, max] aspect ratio (width / height).")
          .field("interpolation", &S::interpolation, "bilinear, bicubic or nearest.",
                 config::one_of({"bilinear", "bicubic", "nearest"}))
          .field("p", &S::p, "Flip probability.", config::in_range(0.0, 1.0, false))
          .field("mean", &S::mean, "normalize: per-channel mean.")
          .field("std", &S::std, "normalize: per-channel standard deviation.")
          .field("background_color", &S::background_color,
                 "expand_to_square: the [R, G, B] (0-255) of the square around a non-square image.")
          .validate([](const S& s, const auto& fail) {
            const bool sized = s.name == "resize" || s.name == "center_crop" || s.name == "random_resized_crop";
            if (sized && (!s.size || s.size->items.empty() || s.size->items.size() > 2))
              fail("size", "required by " + s.name + ": [H, W] or one number");
            if (sized)
              for (double v : s.size->items)
                if (v < 1 || v != std::floor(v)) fail("size", "expected whole numbers of pixels");
            if (s.name == "normalize" && (!s.mean || !s.std)) fail("mean", "normalize needs mean and std");
            if (s.name == "normalize")
              for (double v : s.std->items)
                if (v <= 0) fail("std", "expected standard deviations > 0");
            if (s.scale.items.size() != 2 || s.scale.items[0] > s.scale.items[1] || s.scale.items[0] <= 0)
              fail("scale", "expected [min, max] with 0 < min <= max");
            if (s.name == "expand_to_square" && (!s.background_color || s.background_color->size() != 3))
              fail("background_color", "required by expand_to_square: [R, G, B]");
            if (s.background_color)
              for (int64_t v : *s.background_color)
                if (v < 0 || v > 255) fail("background_color", "expected values 0 to 255");
            if (s.ratio.items.size() != 2 || s.ratio.items[0] > s.ratio.items[1] || s.ratio.items[0] <= 0)
              fail("ratio", "expected [min, max] with 0 < min <= max");
          });
  return s;
}

CropBox random_resized_crop_box(int64_t H, int64_t W, const std::vector<double>& scale,
                                const std::vector<double>& ratio, uint64_t seed) {
  SplitMix64 rng{SplitMix64::mix(seed)};
  const double area = double(H) * double(W);
  const double log_lo = std::log(ratio[0]), log_hi = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (scale[0] + (scale[1] - scale[0]) * rng.uniform());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    const auto w = static_cast<int64_t>(std::llround(std::sqrt(target * aspect)));
    const auto h = static_cast<int64_t>(std::llround(std::sqrt(target / aspect)));
    if (w > 0 && h > 0 && w <= W && h <= H) {
      const auto top = static_cast<int64_t>(rng.below(uint64_t(H - h + 1)));
      const auto left = static_cast<int64_t>(rng.below(uint64_t(W - w + 1)));
      return {top, left, h, w};
    }
  }
  // The central crop, its aspect ratio clamped into `ratio`.
  const double in_ratio = double(W) / double(H);
  int64_t w = W, h = H;
  if (in_ratio < ratio[0]) h = static_cast<int64_t>(std::llround(double(W) / ratio[0]));
  else if (in_ratio > ratio[1]) w = static_cast<int64_t>(std::llround(double(H) * ratio[1]));
  return {(H - h) / 2, (W - w) / 2, h, w};
}

namespace {

std::pair<int64_t, int64_t> size_of(const TransformSpec& t) {
  const auto& s = t.size->items;
  return {static_cast<int64_t>(s[0]), static_cast<int64_t>(s.size() > 1 ? s[1] : s[0])};
}

// torchvision's CenterCrop: zero padding first when the image is smaller.
torch::Tensor center_crop(torch::Tensor x, int64_t h, int64_t w) {
  const int64_t H = x.size(-2), W = x.size(-1);
  if (h > H || w > W) {
    const int64_t pad_h = std::max<int64_t>(h - H, 0), pad_w = std::max<int64_t>(w - W, 0);
    x = torch::constant_pad_nd(x, {pad_w / 2, (pad_w + 1) / 2, pad_h / 2, (pad_h + 1) / 2}, 0);
  }
  const int64_t top = static_cast<int64_t>(std::llround((x.size(-2) - h) / 2.0));
  const int64_t left = static_cast<int64_t>(std::llround((x.size(-1) - w) / 2.0));
  return x.narrow(-2, top, h).narrow(-1, left, w);
}

// LLaVA's expand2square: a non-square uint8 image centred (offset rounded
// down) on a square of its longer side filled with `color`.
torch::Tensor expand_to_square(const torch::Tensor& x, const std::vector<int64_t>& color) {
  const int64_t C = x.size(0), H = x.size(-2), W = x.size(-1), side = std::max(H, W);
  if (H == W) return x;
  if (x.is_floating_point() || C != 3)
    throw std::invalid_argument("transforms: expand_to_square takes the decoded RGB image (put it before to_tensor)");
  torch::Tensor square = torch::tensor(color, torch::kLong).to(x.scalar_type()).view({3, 1, 1}).repeat({1, side, side});
  square.narrow(1, (side - H) / 2, H).narrow(2, (side - W) / 2, W).copy_(x);
  return square;
}

}  // namespace

torch::Tensor TransformPipeline::apply(torch::Tensor x, uint64_t seed) const {
  uint64_t draw = 0;  // each transform's own stream
  for (const TransformSpec& t : specs_) {
    const uint64_t stream = SplitMix64::mix(seed + 0x9E3779B97F4A7C15ull * ++draw);
    if (t.name == "resize") {
      if (t.size->items.size() == 1) {  // the shorter side to `size`, the other in proportion (truncated)
        const auto s = static_cast<int64_t>(t.size->items[0]);
        const int64_t H = x.size(-2), W = x.size(-1);
        const int64_t h = H <= W ? s : static_cast<int64_t>(double(s) * double(H) / double(W));
        const int64_t w = H <= W ? static_cast<int64_t>(double(s) * double(W) / double(H)) : s;
        x = resize_image(x, h, w, t.interpolation);
      } else {
        auto [h, w] = size_of(t);
        x = resize_image(x, h, w, t.interpolation);
      }
    } else if (t.name == "center_crop") {
      auto [h, w] = size_of(t);
      x = center_crop(x, h, w).contiguous();
    } else if (t.name == "random_resized_crop") {
      const CropBox box = random_resized_crop_box(x.size(-2), x.size(-1), t.scale.items, t.ratio.items, stream);
      auto [h, w] = size_of(t);
      x = resize_image(x.narrow(-2, box.top, box.height).narrow(-1, box.left, box.width), h, w, t.interpolation);
    } else if (t.name == "random_horizontal_flip" || t.name == "random_vertical_flip") {
      SplitMix64 rng{stream};
      if (rng.uniform() < t.p) x = x.flip({t.name == "random_horizontal_flip" ? -1 : -2}).contiguous();
    } else if (t.name == "expand_to_square") {
      x = expand_to_square(x, *t.background_color);
    } else if (t.name == "to_tensor") {
      x = x.to(torch::kFloat).div_(255.0f);
    } else if (t.name == "normalize") {
      if (!x.is_floating_point()) throw std::invalid_argument("transforms: normalize needs to_tensor before it");
      const int64_t C = x.size(0);
      const auto& m = t.mean->items;
      const auto& s = t.std->items;
      if ((m.size() != 1 && int64_t(m.size()) != C) || (s.size() != 1 && int64_t(s.size()) != C))
        throw std::invalid_argument("transforms: normalize has " + std::to_string(m.size()) + " means for " +
                                    std::to_string(C) + " channels");
      auto per_channel = [&](const std::vector<double>& v) {
        return torch::tensor(v, torch::kDouble).to(torch::kFloat).view({-1, 1, 1});
      };
      x = (x - per_channel(m)) / per_channel(s);
    }
  }
  return x;
}

}  // namespace zoo::data
