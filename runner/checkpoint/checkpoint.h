// Checkpoint files: naming (checkpoint_<step>[_<YYYYmmdd_HHMMSS>].mdl by
// default, see runner/params/checkpoint_naming.h), discovery, atomic writes and reads of LibTorch pickles that Python's
// torch.load opens, and model state-dict conversion.
// Defines: CheckpointFile, list_checkpoints, new_checkpoint_path,
// save_checkpoint_file, load_checkpoint_file, model_weights, step_in_name,
// model_state_dict, load_model_state_dict, checkpoint_metadata, lora_base_of, params_of.
#pragma once

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runner/params/checkpoint_naming.h"
#include "runner/params/params.h"

namespace zoo::ckpt {

struct CheckpointFile {
  std::string path;
  int64_t step = 0;
  std::string timestamp;  // "" for the plain name, which sorts first
};

// The files in `dir` named as `naming` names checkpoints, ascending by (step,
// timestamp). A name whose step does not fit in 64 bits is left out with a
// warning.
std::vector<CheckpointFile> list_checkpoints(const std::string& dir, const CheckpointNaming& naming = {});
// dir/checkpoint_<step>.mdl (as `naming` names it), or with a _<timestamp>
// after the step if that exists.
std::string new_checkpoint_path(const std::string& dir, int64_t step, const CheckpointNaming& naming = {});

// Writes to a temporary file, fsyncs and renames, so a crash never leaves a
// partial checkpoint under the final name. Adds "__checksum__", a CRC32C of
// the contents, which loading verifies.
void save_checkpoint_file(const std::string& path, const c10::impl::GenericDict& dict);
// Throws std::runtime_error naming the file when it is missing, truncated,
// unreadable or fails its checksum. Returns the dict without "__checksum__".
// Files written by Python's torch.save (a state dict, or a dict with a
// "model" state dict) load as {"model": weights[, "global_step"]}.
c10::impl::GenericDict load_checkpoint_file(const std::string& path);
// The file's contents as stored: no checksum checked, a sharded index not
// assembled, each tensor a view of its record in a mapping of the file that
// is read only where a tensor's bytes are touched (`zoo checkpoint info`
// reads a 13B checkpoint's shapes without reading its weights). The mapping
// is read-only: writing to these tensors is a crash. Throws
// std::runtime_error naming the file when it is not a zip archive of a
// pickle (torch.save's format since PyTorch 1.6).
c10::IValue read_checkpoint_as_stored(const std::string& path);

// The "model" state dict of a loaded checkpoint; throws std::runtime_error
// naming the file and the keys it has when there is none.
c10::impl::GenericDict model_weights(const c10::impl::GenericDict& dict, const std::string& path);
// The step in a checkpoint_<step>[_<timestamp>].mdl file name (as `naming`
// names them), if it is one.
std::optional<int64_t> step_in_name(const std::string& path, const CheckpointNaming& naming = {});

// modelzoo's "__metadata__": [{version, model_name, params (the resolved
// params as YAML text), and any `extra` entries}].
c10::impl::GenericList checkpoint_metadata(const Params& params, const std::map<std::string, std::string>& extra = {});
// The base a LoRA checkpoint's adapters apply to: the checkpoint itself
// when its weights have no adapters (a converted base), else the
// "lora_base" of its metadata ("" when it names none).
std::string lora_base_of(const c10::impl::GenericDict& dict, const std::string& path);
// A string entry of the checkpoint's metadata, "" when absent.
std::string metadata_value(const c10::impl::GenericDict& dict, const std::string& key);
// The Hugging Face model a LoRA checkpoint's base was converted from (for PEFT's base_model_name_or_path): the
// metadata's "lora_base_model", or a converted base's own "converted_from"; "" when neither says.
std::string lora_base_model_of(const c10::impl::GenericDict& dict);
// The directory whose tokenizer goes with a checkpoint: beside it (zoo convert copies it there), else beside the base
// a LoRA checkpoint applies to; "" when neither holds one. `searched` gets the directories looked in.
std::string tokenizer_dir_of(const c10::impl::GenericDict& dict, const std::string& path,
                             std::vector<std::string>* searched = nullptr);

// The params a checkpoint was made with: `params_file` when given, else the
// ones stored in its metadata (an error telling to pass `flag` when absent).
Params params_of(const c10::impl::GenericDict& dict, const std::string& path,
                 const std::optional<std::string>& params_file, const std::string& flag);

// The global CPU generator's state as {"torch_cpu": bytes}, and back.
c10::impl::GenericDict rng_state_dict();
void load_rng_state_dict(const c10::impl::GenericDict& saved);
// Deletes the oldest checkpoints in `dir` beyond `max`, never `keep`.
void prune_checkpoints(const std::string& dir, int64_t max, const std::string& keep,
                       const CheckpointNaming& naming = {});

// Parameters and buffers as {"model.<name>": tensor}, as modelzoo saves them
// (a models::Model may name another prefix: checkpoint_key_prefix).
c10::impl::GenericDict model_state_dict(const torch::nn::Module& model);
// Its keys, each with the name of the parameter or buffer it holds.
std::vector<std::pair<std::string, std::string>> model_state_names(const torch::nn::Module& model);
// Copies tensors into the model. Keys may carry the "model." prefix or not;
// a models::Model adapts them first (adapt_loaded_state).
// strict: missing or unexpected keys are an error listing them; otherwise they
// are returned as warnings. Shape mismatches, and a state in which no key
// matches the model, are always an error.
// `copy`, when given, puts each checked tensor in place of `target.copy_(saved)`
// (fully sharded parameters take only their shard of it).
using CopyIntoModel = std::function<void(const std::string& name, torch::Tensor& target, const torch::Tensor& saved)>;
std::vector<std::string> load_model_state_dict(torch::nn::Module& model, const c10::impl::GenericDict& state,
                                               bool strict, const std::string& source, const CopyIntoModel& copy = {});
// `state` (keys without "model.") as the model's checkpoint holds it:
// {"model.<name>": tensor} in the model's order, each cast to the model's
// dtype, checked as a strict load checks it. `model` may be on the meta
// device, so a conversion never holds a second copy of the weights; each
// tensor leaves `state` as it is cast.
c10::impl::GenericDict model_state_dict_from(const torch::nn::Module& model, std::map<std::string, torch::Tensor> state,
                                             const std::string& source);

}  // namespace zoo::ckpt
