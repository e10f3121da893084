// Implementation of data/image.h.
#include "data/image.h"

#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>

#include "data/splitmix.h"

namespace zoo::data {

namespace {

// libjpeg reports errors through a callback; this one jumps back with the message.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_jpeg_error(j_common_ptr info) {
  auto* err = reinterpret_cast<JpegError*>(info->err);
  (*info->err->format_message)(info, err->message);
  std::longjmp(err->jump, 1);
}

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

// RGB (3, H, W) -> L (1, H, W) with PIL's fixed-point weights.
torch::Tensor pil_luma(const torch::Tensor& rgb) {
  const torch::Tensor hwc = rgb.permute({1, 2, 0}).contiguous();
  const int64_t H = hwc.size(0), W = hwc.size(1);
  torch::Tensor luma = torch::empty({1, H, W}, torch::kByte);
  const uint8_t* in = hwc.data_ptr<uint8_t>();
  uint8_t* out = luma.data_ptr<uint8_t>();
  for (int64_t i = 0; i < H * W; ++i, in += 3)
    out[i] = static_cast<uint8_t>((in[0] * 19595u + in[1] * 38470u + in[2] * 7471u + 0x8000u) >> 16);
  return luma;
}

}  // namespace

namespace {

// Decodes into `pixels` (H, W, components) owned by the caller: the
// function that calls setjmp holds no object with a destructor, so
// libjpeg's longjmp on an error skips nothing. False with `message` set on errors.
bool decode_jpeg(FILE* file, std::vector<uint8_t>& pixels, int64_t shape[3], char* message) {
  jpeg_decompress_struct info;
  JpegError err;
  info.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_jpeg_error;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&info);
    std::snprintf(message, JMSG_LENGTH_MAX, "%s", err.message);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_stdio_src(&info, file);
  jpeg_read_header(&info, TRUE);
  const bool cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
  info.out_color_space = info.jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&info);
  shape[0] = info.output_height, shape[1] = info.output_width, shape[2] = info.output_components;
  pixels.resize(static_cast<size_t>(shape[0] * shape[1] * shape[2]));
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = pixels.data() + int64_t(info.output_scanline) * shape[1] * shape[2];
    jpeg_read_scanlines(&info, &row, 1);
  }
  const bool inverted = info.saw_Adobe_marker;  // Adobe's CMYK JPEGs store 255 - value
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  if (cmyk) {  // to RGB as PIL converts: R = (255 - C)(255 - K) / 255
    const size_t n = pixels.size() / 4;
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* px = pixels.data() + i * 4;
      const unsigned k = inverted ? px[3] : 255u - px[3];
      uint8_t rgb[3];
      for (int c = 0; c < 3; ++c) rgb[c] = uint8_t(((inverted ? px[c] : 255u - px[c]) * k + 127u) / 255u);
      std::copy(rgb, rgb + 3, pixels.data() + i * 3);
    }
    pixels.resize(n * 3);
    shape[2] = 3;
  }
  return true;
}

}  // namespace

torch::Tensor read_jpeg(const std::string& path, int64_t channels) {
  if (channels != 1 && channels != 3)
    throw std::invalid_argument(path + ": images are read with 1 or 3 channels, not " + std::to_string(channels));
  std::unique_ptr<FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) throw std::runtime_error(path + ": cannot open");
  std::vector<uint8_t> pixels;
  int64_t shape[3] = {0, 0, 0};
  char message[JMSG_LENGTH_MAX] = {0};
  if (!decode_jpeg(file.get(), pixels, shape, message))
    throw std::runtime_error(path + ": not a readable JPEG (" + message + ")");
  const int64_t H = shape[0], W = shape[1], C = shape[2];
  // from_blob borrows `pixels`: every result is a copy.
  const torch::Tensor rows = torch::from_blob(pixels.data(), {H, W, C}, torch::kByte);
  if (C == channels) return rows.permute({2, 0, 1}).clone(at::MemoryFormat::Contiguous);
  if (channels == 3) return rows.permute({2, 0, 1}).expand({3, H, W}).clone(at::MemoryFormat::Contiguous);
  return pil_luma(rows.permute({2, 0, 1}));  // reads `pixels` before they go
}

void write_jpeg(const std::string& path, const torch::Tensor& image, int quality) {
  const torch::Tensor hwc = image.to(torch::kByte).permute({1, 2, 0}).contiguous();
  const int64_t H = hwc.size(0), W = hwc.size(1), C = hwc.size(2);
  if (C != 1 && C != 3 && C != 4) throw std::invalid_argument(path + ": JPEG images have 1, 3 or 4 (CMYK) channels");
  std::unique_ptr<FILE, FileCloser> file(std::fopen(path.c_str(), "wb"));
  if (!file) throw std::runtime_error(path + ": cannot create");
  jpeg_compress_struct info;
  JpegError err;
  info.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_jpeg_error;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&info);
    throw std::runtime_error(path + ": cannot write the JPEG (" + err.message + ")");
  }
  jpeg_create_compress(&info);
  jpeg_stdio_dest(&info, file.get());
  info.image_width = static_cast<JDIMENSION>(W);
  info.image_height = static_cast<JDIMENSION>(H);
  info.input_components = static_cast<int>(C);
  info.in_color_space = C == 1   ? JCS_GRAYSCALE
                        : C == 3 ? JCS_RGB
                                 : JCS_CMYK;  // CMYK: stored as given, with Adobe's marker
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  const uint8_t* base = hwc.data_ptr<uint8_t>();
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(base + int64_t(info.next_scanline) * W * C);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
}

torch::Tensor read_png(const std::string& path, int64_t channels) {
  if (channels != 1 && channels != 3)
    throw std::invalid_argument(path + ": images are read with 1 or 3 channels, not " + std::to_string(channels));
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str()))
    throw std::runtime_error(path + ": not a readable PNG (" + image.message + ")");
  // Gray files stay gray (label maps keep their values); color reads as RGB, luma taken as PIL takes it.
  const bool gray = (image.format & PNG_FORMAT_FLAG_COLOR) == 0;
  image.format = gray ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  const int64_t C = gray ? 1 : 3, H = image.height, W = image.width;
  torch::Tensor hwc = torch::empty({H, W, C}, torch::kByte);
  if (!png_image_finish_read(&image, nullptr, hwc.data_ptr<uint8_t>(), 0, nullptr)) {
    const std::string message = image.message;
    png_image_free(&image);
    throw std::runtime_error(path + ": not a readable PNG (" + message + ")");
  }
  const torch::Tensor chw = hwc.permute({2, 0, 1}).contiguous();
  if (C == channels) return chw;
  return channels == 3 ? chw.expand({3, H, W}).contiguous() : pil_luma(chw);
}

void write_png(const std::string& path, const torch::Tensor& image) {
  const torch::Tensor hwc = image.to(torch::kByte).permute({1, 2, 0}).contiguous();
  const int64_t C = hwc.size(2);
  if (C != 1 && C != 3) throw std::invalid_argument(path + ": PNG images are written with 1 or 3 channels");
  png_image out;
  std::memset(&out, 0, sizeof out);
  out.version = PNG_IMAGE_VERSION;
  out.width = static_cast<png_uint_32>(hwc.size(1));
  out.height = static_cast<png_uint_32>(hwc.size(0));
  out.format = C == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  if (!png_image_write_to_file(&out, path.c_str(), 0, hwc.data_ptr<uint8_t>(), 0, nullptr))
    throw std::runtime_error(path + ": cannot write the PNG (" + out.message + ")");
}

torch::Tensor read_tiff(const std::string& path, int64_t channels) {
  if (channels != 1 && channels != 3)
    throw std::invalid_argument(path + ": images are read with 1 or 3 channels, not " + std::to_string(channels));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto fail = [&](const std::string& what) -> std::runtime_error { return std::runtime_error(path + ": " + what); };
  if (bytes.size() < 8 || !((bytes[0] == 'I' && bytes[1] == 'I') || (bytes[0] == 'M' && bytes[1] == 'M')))
    throw fail("not a TIFF file");
  const bool little = bytes[0] == 'I';
  auto u = [&](size_t at, int size) -> uint64_t {  // an unsigned field of `size` bytes in the file's byte order
    if (at + size > bytes.size())
      throw fail("truncated (a field at byte " + std::to_string(at) + " lies past its end)");
    uint64_t v = 0;
    for (int i = 0; i < size; ++i) {
      const auto b = static_cast<uint8_t>(bytes[at + (little ? size - 1 - i : i)]);
      v = (v << 8) | b;
    }
    return v;
  };
  // The first IFD's entries: tag -> values (SHORT or LONG).
  std::map<uint16_t, std::vector<uint64_t>> tags;
  const size_t ifd = u(4, 4);
  const size_t entries = u(ifd, 2);
  for (size_t e = 0; e < entries; ++e) {
    const size_t at = ifd + 2 + e * 12;
    const auto tag = static_cast<uint16_t>(u(at, 2)), type = static_cast<uint16_t>(u(at + 2, 2));
    const size_t count = u(at + 4, 4);
    const int size = type == 3 ? 2 : type == 4 ? 4 : type == 1 ? 1 : 0;
    if (size == 0) continue;  // rationals, ASCII, ...: nothing read here needs them
    const size_t values = size_t(size) * count <= 4 ? at + 8 : u(at + 8, 4);
    for (size_t i = 0; i < count; ++i) tags[tag].push_back(u(values + i * size, size));
  }
  auto tag = [&](uint16_t t, std::optional<uint64_t> fallback = std::nullopt) -> uint64_t {
    const auto it = tags.find(t);
    if (it != tags.end() && !it->second.empty()) return it->second[0];
    if (fallback) return *fallback;
    throw fail("no TIFF tag " + std::to_string(t));
  };
  if (tags.count(322)) throw fail("a tiled TIFF (zoo reads strips only)");
  if (tag(259, 1) != 1)
    throw fail("a compressed TIFF (compression " + std::to_string(tag(259)) +
               "; zoo reads uncompressed ones, as PIL saves them)");
  if (tag(284, 1) != 1) throw fail("a planar TIFF (zoo reads interleaved samples only)");
  const int64_t W = tag(256), H = tag(257), spp = tag(277, 1);
  for (uint64_t bits : tags.count(258) ? tags[258] : std::vector<uint64_t>{1})
    if (bits != 8) throw fail(std::to_string(bits) + "-bit samples (zoo reads 8-bit TIFFs)");
  const uint64_t photometric = tag(262);
  if (photometric == 3) throw fail("a palette TIFF (zoo reads gray and RGB ones)");
  if (!((spp == 1 && photometric <= 1) || (spp >= 3 && photometric == 2)))
    throw fail(std::to_string(spp) + " samples per pixel with photometric interpretation " +
               std::to_string(photometric));
  const std::vector<uint64_t>& offsets = tags[273];
  const std::vector<uint64_t>& counts = tags[279];
  if (offsets.empty() || offsets.size() != counts.size()) throw fail("strip offsets and byte counts do not match");
  std::vector<uint8_t> pixels;
  pixels.reserve(size_t(H * W * spp));
  for (size_t s = 0; s < offsets.size(); ++s) {
    if (offsets[s] + counts[s] > bytes.size())
      throw fail("truncated (strip " + std::to_string(s) + " lies past its end)");
    pixels.insert(pixels.end(), bytes.begin() + offsets[s], bytes.begin() + offsets[s] + counts[s]);
  }
  if (pixels.size() < size_t(H * W * spp))
    throw fail("its strips hold " + std::to_string(pixels.size()) + " bytes for " + std::to_string(W) + " x " +
               std::to_string(H) + " x " + std::to_string(spp));
  torch::Tensor hwc = torch::from_blob(pixels.data(), {H, W, spp}, torch::kByte).clone();
  if (photometric == 0) hwc = 255 - hwc;                // WhiteIsZero
  if (spp > 3) hwc = hwc.narrow(2, 0, 3).contiguous();  // alpha (or extra samples) dropped
  const torch::Tensor chw = hwc.permute({2, 0, 1}).contiguous();
  if (chw.size(0) == channels) return chw;
  return channels == 3 ? chw.expand({3, H, W}).contiguous() : pil_luma(chw);
}

torch::Tensor read_image(const std::string& path, int64_t channels) {
  unsigned char magic[4] = {0, 0, 0, 0};
  {
    std::unique_ptr<FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
    if (!file) throw std::runtime_error(path + ": cannot open");
    if (std::fread(magic, 1, 4, file.get()) != 4) throw std::runtime_error(path + ": too short to be an image");
  }
  if (magic[0] == 0x89 && magic[1] == 'P' && magic[2] == 'N' && magic[3] == 'G') return read_png(path, channels);
  if (magic[0] == 0xFF && magic[1] == 0xD8) return read_jpeg(path, channels);
  if ((magic[0] == 'I' && magic[1] == 'I' && magic[2] == 42 && magic[3] == 0) ||
      (magic[0] == 'M' && magic[1] == 'M' && magic[2] == 0 && magic[3] == 42))
    return read_tiff(path, channels);
  throw std::runtime_error(path + ": not a JPEG, PNG or TIFF (the image formats zoo reads)");
}

torch::Tensor resize_image(const torch::Tensor& image, int64_t height, int64_t width, const std::string& mode) {
  if (image.size(-2) == height && image.size(-1) == width) return image;
  namespace F = torch::nn::functional;
  const torch::Tensor x = image.to(torch::kFloat).unsqueeze(0);
  if (mode == "nearest")  // the ATen op itself: LibTorch 1.13's interpolate() warns on every nearest-exact call
    return at::_upsample_nearest_exact2d(x, {height, width}).squeeze(0).round().to(torch::kByte);
  auto o = F::InterpolateFuncOptions().size(std::vector<int64_t>{height, width});
  if (mode == "bicubic") o.mode(torch::kBicubic).align_corners(false).antialias(true);
  else if (mode == "bilinear") o.mode(torch::kBilinear).align_corners(false).antialias(true);
  else throw std::invalid_argument("unknown interpolation '" + mode + "' (expected bilinear, bicubic or nearest)");
  return F::interpolate(x, o).squeeze(0).clamp(0, 255).round().to(torch::kByte);
}

torch::Tensor resize_nearest(const torch::Tensor& image, int64_t height, int64_t width) {
  if (image.size(-2) == height && image.size(-1) == width) return image;
  auto source = [](int64_t out, int64_t in) {
    // floor(i * in / out) in float32, as torch's legacy nearest computes it
    const float scale = float(in) / float(out);
    std::vector<int64_t> idx(static_cast<size_t>(out));
    for (int64_t i = 0; i < out; ++i) idx[i] = std::min(int64_t(std::floor(float(i) * scale)), in - 1);
    return torch::tensor(idx, torch::kLong);
  };
  return image.index_select(-2, source(height, image.size(-2))).index_select(-1, source(width, image.size(-1)));
}

torch::Tensor tile_image(const torch::Tensor& image, int64_t height, int64_t width) {
  torch::Tensor x = image;
  auto repeat = [](const torch::Tensor& t, int64_t dim, int64_t target) {
    const int64_t n = t.size(dim);
    if (target <= n) return t;
    return t.index_select(dim, torch::arange(target, torch::kLong).remainder(n));
  };
  x = repeat(x, -2, height);
  return repeat(x, -1, width);
}

const std::vector<std::string> kNormalizeMethods = {"zero_centered", "zero_one", "standard_score"};

torch::Tensor normalize_image(const torch::Tensor& image, const std::string& method) {
  const torch::Tensor x = image.to(torch::kFloat);
  if (method.empty()) return x;
  if (method == "zero_centered") return x / 127.5 - 1;
  if (method == "zero_one") return x / 255.0;
  if (method == "standard_score") return (x - x.mean()) / x.std();
  throw std::invalid_argument("unknown normalize_data_method '" + method + "'");
}

SegmentationAugment SegmentationAugment::draw(uint64_t seed, bool square) {
  SplitMix64 rng{SplitMix64::mix(seed)};
  SegmentationAugment a;
  a.flip = rng.uniform() > 0.5;
  a.quarter_turns = static_cast<int64_t>(rng.below(3)) * (square ? 1 : 2);
  a.brighter = rng.uniform() > 0.5;
  return a;
}

torch::Tensor SegmentationAugment::mask(const torch::Tensor& x) const {
  torch::Tensor y = flip ? x.flip({-1}) : x;
  if (quarter_turns % 4 != 0) y = torch::rot90(y, quarter_turns, {-2, -1});
  return y.contiguous();
}

torch::Tensor SegmentationAugment::image(const torch::Tensor& x) const {
  const torch::Tensor y = mask(x);
  return brighter ? y + 0.2 : y;
}

}  // namespace zoo::data
