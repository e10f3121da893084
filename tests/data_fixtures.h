// Data files in the formats modelzoo's processors read, shared by the data
// tests and the config sweep. Defines: write_idx, write_severstal.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/image.h"

namespace zoo::testing {

// An IDX file of unsigned bytes (MNIST's): magic 00 00 08 <rank>, big-endian dims, values.
inline void write_idx(const std::string& path, const std::vector<int32_t>& dims, const std::vector<uint8_t>& values) {
  std::string bytes = {0, 0, 8, static_cast<char>(dims.size())};
  for (int32_t d : dims)
    for (int shift : {24, 16, 8, 0}) bytes += static_cast<char>((d >> shift) & 0xFF);
  bytes.append(values.begin(), values.end());
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// A Severstal-layout directory: train_images/*.jpg (1600 x 256, gray
// background around 60) each with one bright (200) defect rectangle of
// class 3, its run-length mask in train.csv, and rows of class 1 that the
// processor must skip.
inline void write_severstal(const std::string& dir, int images, uint64_t seed) {
  std::filesystem::create_directories(dir + "/train_images");
  std::ofstream csv(dir + "/train.csv");
  csv << "ImageId,ClassId,EncodedPixels\n";
  torch::manual_seed(static_cast<int64_t>(seed));
  for (int i = 0; i < images; ++i) {
    const int64_t w = 250 + torch::randint(0, 250, {1}).item<int64_t>(),
                  h = 80 + torch::randint(0, 80, {1}).item<int64_t>();
    const int64_t x0 = torch::randint(0, 1600 - w, {1}).item<int64_t>(),
                  y0 = torch::randint(0, 256 - h, {1}).item<int64_t>();
    torch::Tensor image = (torch::randn({1, 256, 1600}) * 8 + 60).clamp(0, 255);
    image.index_put_({0, torch::indexing::Slice(y0, y0 + h), torch::indexing::Slice(x0, x0 + w)}, 200);
    const std::string name = "img" + std::to_string(i) + ".jpg";
    data::write_jpeg(dir + "/train_images/" + name, image.to(torch::kByte), 95);
    std::string rle;
    for (int64_t x = x0; x < x0 + w; ++x)
      rle += (rle.empty() ? "" : " ") + std::to_string(x * 256 + y0 + 1) + " " + std::to_string(h);
    csv << name << ",3," << rle << "\n";
    if (i % 3 == 0) csv << name << ",1,1 10\n";
  }
}

}  // namespace zoo::testing
