// Image files and the transforms modelzoo's vision data processors apply
// with torchvision: JPEG decoding (libjpeg), resizing, tiling, normalizing
// and the segmentation augmentations. Images are (C, H, W) tensors; files
// are JPEG (libjpeg), PNG (libpng) or uncompressed TIFF (read here).
// Defines: read_jpeg, write_jpeg, read_png, write_png, read_tiff, read_image, resize_image, resize_nearest, tile_image,
// normalize_image, kNormalizeMethods, SegmentationAugment.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace zoo::data {

// A JPEG as uint8 (channels, H, W): channels 1 converts color to luma as
// PIL's convert("L") does (R 299/1000 + G 587/1000 + B 114/1000, rounded);
// channels 3 gives RGB (gray files repeated; CMYK converted as PIL does). Throws std::runtime_error
// naming the file when it cannot be read or decoded.
torch::Tensor read_jpeg(const std::string& path, int64_t channels);
// Writes uint8 (1, 3 or 4 = CMYK, H, W) as a JPEG of `quality` (test fixtures, tools).
void write_jpeg(const std::string& path, const torch::Tensor& image, int quality = 95);
// A PNG (libpng) as uint8 (channels, H, W), channels 1 or 3 as read_jpeg
// gives them; 16-bit samples are scaled to 8 bits, alpha is dropped.
torch::Tensor read_png(const std::string& path, int64_t channels);
// Writes uint8 (1 or 3, H, W) as a PNG (lossless: label maps, fixtures).
void write_png(const std::string& path, const torch::Tensor& image);
// A baseline TIFF as PIL saves one (uncompressed 8-bit strips, gray, RGB or
// RGBA, either byte order), channels 1 or 3 as read_jpeg gives them.
// Compressed, tiled, planar and palette files are an error naming the file.
torch::Tensor read_tiff(const std::string& path, int64_t channels);
// A JPEG, PNG or TIFF, told apart by the file's first bytes (not its name).
torch::Tensor read_image(const std::string& path, int64_t channels);

// torchvision's Resize of a uint8 image (torchvision resizes PIL images and
// uint8 tensors alike up to rounding): `mode` bilinear or bicubic (float,
// antialiased when shrinking, clamped to [0, 255], rounded to uint8), or
// nearest as PIL samples it (pixel centres: torch's nearest-exact).
torch::Tensor resize_image(const torch::Tensor& image, int64_t height, int64_t width, const std::string& mode);
// torchvision's Resize of a mask tensor with NEAREST: source pixel floor(i * in / out).
torch::Tensor resize_nearest(const torch::Tensor& image, int64_t height, int64_t width);
// modelzoo's tile_image_transform: repeats the image along H and W up to the
// target size (output pixel i is input pixel i mod size); never shrinks.
torch::Tensor tile_image(const torch::Tensor& image, int64_t height, int64_t width);

extern const std::vector<std::string> kNormalizeMethods;  // zero_centered, zero_one, standard_score
// modelzoo's normalize_tensor_transform, to float32: zero_centered x / 127.5 - 1,
// zero_one x / 255, standard_score (x - mean) / std (unbiased), "" as is.
torch::Tensor normalize_image(const torch::Tensor& image, const std::string& method);

// modelzoo's UNet augmentation of one sample, drawn from `seed`: a horizontal
// flip (p 0.5), 0-2 counter-clockwise quarter turns (0 or 2 for non-square
// images), and + 0.2 brightness on the image (p 0.5).
struct SegmentationAugment {
  bool flip = false;
  int64_t quarter_turns = 0;
  bool brighter = false;
  static SegmentationAugment draw(uint64_t seed, bool square);
  torch::Tensor image(const torch::Tensor& x) const;  // (C, H, W) float
  torch::Tensor mask(const torch::Tensor& x) const;   // (C, H, W)
};

}  // namespace zoo::data
