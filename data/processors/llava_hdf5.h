// modelzoo's image-and-text HDF5 processors, read map-style (shuffling
// permutes all samples each epoch):
// - LlavaHDF5MapDataProcessor: LLaVA's samples as modelzoo's LLaVA
//   preprocessing writes them, dataset "data" int32 (n, 4, msl) with rows
//   text_input_ids / loss_mask / labels / key_padding_mask (1: not attended,
//   e.g. an absent image's positions), and dataset "img_path" (n, 1) of byte
//   strings, each an image under img_data_dir or "None" for a text-only
//   sample (a black image then stands in, as modelzoo's).
// - MultimodalSimpleHDF5MapDataProcessor: multimodal_simple's, as modelzoo's
//   data_preprocessing writes them with is_multimodal: "data" (n, 5, msl),
//   the four rows above and token_modality_idx (1: an image position);
//   "img_path" (n, max_num_img), "None" for an unused slot; and
//   "img_data_loc" (n, max_num_img, num_patches): the sequence position of
//   each image feature, msl for an unused slot's.
// Images are decoded to RGB and passed through `transforms`.
// Defines: LlavaHdf5Options, MultimodalSimpleHdf5Options, read_hdf5_strings,
// ImageTextLayout, ImageTextSampleSource, llava_hdf5_processor, multimodal_simple_hdf5_processor.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/hdf5_files.h"
#include "data/image_transforms.h"
#include "data/loader.h"
#include "data/processors/gpt_hdf5.h"
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

struct MultimodalSimpleHdf5Options : LlavaHdf5Options {
  int64_t max_num_img = 1;             // image slots per sample: img_path's second dimension
  std::optional<int64_t> num_patches;  // features per image: checked against img_data_loc's when set
  static const config::Schema<MultimodalSimpleHdf5Options>& schema();
};

// The byte strings of dataset `name` of an HDF5 file (fixed-length, as h5py
// writes dtype "S", or variable-length), trailing NULs dropped; throws
// std::runtime_error naming the file when it has no such string dataset.
std::vector<std::string> read_hdf5_strings(const std::string& path, const std::string& name);

// What a processor's files hold beyond the LM rows.
struct ImageTextLayout {
  std::vector<std::string> rows;  // of "data": the LM rows, then 0/1 rows (key_padding_mask, ...) by name
  // Unset: LLaVA's one image a sample, batched (B, C, H, W). Set:
  // multimodal_simple's slots, batched (B, slots, C, H, W), and
  // "img_data_loc" read to image_data_loc int64 (B, slots, patches).
  std::optional<int64_t> image_slots;
  std::optional<int64_t> patches;  // checked against img_data_loc's when set
};

// Batches: text_input_ids, loss_mask, labels, key_padding_mask int64 (B, T),
// the layout's further 0/1 rows likewise (token_modality_idx), image_data
// float and image_data_loc. The text rows are checked as LM data (ids in the
// vocabulary, loss mask 0 or 1), the other rows 0 or 1, image locations
// within 0 .. msl, and each transformed image against image_data_size.
class ImageTextSampleSource : public SampleSource {
 public:
  ImageTextSampleSource(const std::vector<std::string>& files, const LlavaHdf5Options& options, ImageTextLayout layout);
  int64_t num_samples() const override;
  std::string describe() const override;
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  bool reads_epoch() const override { return true; }  // random transforms are drawn anew each epoch
  std::optional<int64_t> tokens_per_sample() const override;

 private:
  int64_t slots() const { return layout_.image_slots.value_or(1); }
  ImageTextLayout layout_;
  std::shared_ptr<Hdf5SampleSource> rows_;
  std::shared_ptr<LmSampleSource> text_;  // rows_' ids, loss mask and labels
  std::shared_ptr<Hdf5Files> locations_;  // img_data_loc, with image_slots
  std::vector<std::string> image_paths_;  // slots() per sample, in rows_' order
  std::string img_data_dir_;
  std::vector<int64_t> image_size_;  // C, H, W
  TransformPipeline transforms_;
  int64_t seed_;
};

DataProcessor llava_hdf5_processor();
DataProcessor multimodal_simple_hdf5_processor();

}  // namespace zoo::data
