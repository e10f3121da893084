// `zoo convert`: Hugging Face checkpoints (safetensors + config.json) to zoo
// checkpoints plus a params YAML ready for fine-tuning, and back.
// Defines: ConvertCommand, run_convert.
#pragma once

#include <optional>
#include <string>

namespace zoo::convert {

struct ConvertCommand {
  std::string checkpoint;             // source: HF file/dir, or a zoo checkpoint
  // Converter (zoo convert --model); empty: hf -> zoo, config.json's
  // model_type; zoo -> hf, the one HF model type that can hold the model.
  std::string model;
  std::string src_fmt, tgt_fmt;       // "hf" or "zoo"
  std::optional<std::string> config;  // hf source: config.json (default: beside the weights)
  std::string output_dir;
};

// Throws std::runtime_error naming the file and the keys at fault.
void run_convert(const ConvertCommand& command);

}  // namespace zoo::convert
