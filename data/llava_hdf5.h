// modelzoo's LlavaHDF5MapDataProcessor: LLaVA's samples from `*.h5` files as
// modelzoo's LLaVA preprocessing writes them, dataset "data" int32 (n, 4, msl)
// with rows text_input_ids / loss_mask / labels / key_padding_mask (1: not
// attended, e.g. an absent image's positions), and dataset "img_path"
// (n, 1) of byte strings, each an image under img_data_dir or "None" for a
// text-only sample (a black image then stands in, as modelzoo's). Images are
// decoded to RGB and passed through `transforms`; read map-style (shuffling
// permutes all samples each epoch). Defines: LlavaHdf5Options,
// read_hdf5_strings, LlavaSampleSource, llava_hdf5_processor.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/gpt_hdf5.h"
#include "data/image_transforms.h"
#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

struct LlavaHdf5Options : LoaderOptions {
  std::string img_data_dir;
  std::vector<int64_t> image_data_size;  // [C, H, W] of the transformed images
  std::vector<TransformSpec> transforms;
  std::optional<int64_t> max_sequence_length;  // checked against the files' when set
  std::optional<std::string> data_subset;      // only these ranges of the samples, e.g. "0.0-0.9"
  bool use_vsl = false;
  bool use_worker_cache = false;
  bool sort_files = true;
  static const config::Schema<LlavaHdf5Options>& schema();
};

// The byte strings of dataset `name` of an HDF5 file (fixed-length, as h5py
// writes dtype "S", or variable-length), trailing NULs dropped; throws
// std::runtime_error naming the file when it has no such string dataset.
std::vector<std::string> read_hdf5_strings(const std::string& path, const std::string& name);

// Batches: text_input_ids, loss_mask, labels, key_padding_mask int64 (B, T)
// and image_data float (B, C, H, W). The text rows are checked as LM data
// (ids in the vocabulary, loss mask 0 or 1), key_padding_mask 0 or 1, and
// each transformed image against image_data_size.
class LlavaSampleSource : public SampleSource {
 public:
  LlavaSampleSource(const std::vector<std::string>& files, const LlavaHdf5Options& options);
  int64_t num_samples() const override;
  std::string describe() const override;
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  bool reads_epoch() const override { return true; }  // random transforms are drawn anew each epoch
  std::optional<int64_t> tokens_per_sample() const override;
  // Sample i's image path relative to img_data_dir ("None": no image).
  const std::string& image_path(int64_t i) const { return image_paths_[static_cast<size_t>(i)]; }

 private:
  std::shared_ptr<Hdf5SampleSource> rows_;
  std::shared_ptr<LmSampleSource> text_;  // rows_' ids, loss mask and labels
  std::vector<std::string> image_paths_;            // per sample, in rows_' order
  std::string img_data_dir_;
  std::vector<int64_t> image_size_;  // C, H, W
  TransformPipeline transforms_;
  int64_t seed_;
};

DataProcessor llava_hdf5_processor();

}  // namespace zoo::data
