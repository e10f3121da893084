// `zoo checkpoint info CKPT`: what a checkpoint holds, read from its pickle
// and headers without reading its tensors' data (a 13B checkpoint's shapes
// take a moment): kind (zoo, zoo sharded, torch.save'd, safetensors or its
// index), step, the model its params describe, tensors by dtype, optimizer
// and its state, grad scaler, LoRA adapters, shards, the tokenizer beside it.
// --verify also reads every tensor to check the stored checksums.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

namespace zoo::tools {

struct CheckpointInfoCommand {
  std::string path;
  bool json = false;    // print the JSON object instead of text
  bool verify = false;  // read every tensor and check the checksums (index and shards)
};

// Throws std::runtime_error naming the file when it is not a checkpoint zoo reads.
nlohmann::json checkpoint_info(const CheckpointInfoCommand& command);
void describe_info(const nlohmann::json& info, std::ostream& out);

}  // namespace zoo::tools
