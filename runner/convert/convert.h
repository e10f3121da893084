// `zoo convert`: Hugging Face checkpoints (safetensors + config.json) to zoo
// checkpoints plus a params YAML ready for fine-tuning, and back; a LoRA
// checkpoint exports as a PEFT adapter and the merged model, and a PEFT
// adapter imports onto a zoo base checkpoint.
// Defines: ConvertCommand, run_convert.
#pragma once

#include <optional>
#include <string>

namespace zoo::convert {

struct ConvertCommand {
  std::string checkpoint;  // source: HF file/dir, or a zoo checkpoint
  // Converter (zoo convert --model); empty: hf -> zoo, config.json's
  // model_type; zoo -> hf, the one HF model type that can hold the model.
  std::string model;
  std::string src_fmt, tgt_fmt;       // "hf" or "zoo"
  std::optional<std::string> config;  // hf source: config.json (default: beside the weights)
  std::string output_dir;
  // --src-fmt peft: the zoo checkpoint of the base model the adapter applies to.
  std::optional<std::string> base_checkpoint;
};

// Throws std::runtime_error naming the file and the keys at fault.
void run_convert(const ConvertCommand& command);

}  // namespace zoo::convert
