// modelzoo's `data_transforms` for LM batches (GptHDF5MapDataProcessor):
// each changes every batch after it is read. Only add_sink_tokens exists in
// zoo; modelzoo's others (add_memory_tokens, PoSE) are refused by name.
// Defines: DataTransformSpec, with_transforms.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"

namespace zoo::data {

struct DataTransformSpec {
  std::string name;
  // add_sink_tokens (StreamingLLM): num_sink_tokens copies of sink_token_id
  // inserted at sink_token_start_pos in input_ids and labels, with
  // attention_mask 0 there (no loss on them); the batch grows by that many
  // tokens unless truncate_to_original_length cuts it back.
  int64_t sink_token_id = 0;
  int64_t num_sink_tokens = 1;
  int64_t sink_token_start_pos = 0;
  bool truncate_to_original_length = false;
  bool use_vsl = false;
  static const config::Schema<DataTransformSpec>& schema();
};

// `loader` with the transforms applied to each batch in order (itself when there are none).
std::unique_ptr<DataLoader> with_transforms(std::unique_ptr<DataLoader> loader,
                                            const std::vector<DataTransformSpec>& transforms);

}  // namespace zoo::data
