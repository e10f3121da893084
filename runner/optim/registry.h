// The optimizers zoo implements, one entry each: modelzoo's name, the keys it
// takes besides the common ones, its defaults, its default learning rate and
// its factory. Config validation, --help-config, the Trainer format and
// make_optimizer all read this one table. No LibTorch here (the factory's
// types are only declared). Defines: OptimizerEntry, optimizer_registry,
// find_optimizer, common_optimizer_keys.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zoo {
struct OptimizerConfig;
}

namespace zoo::optim {

class Optimizer;
struct ParamGroup;

struct OptimizerEntry {
  std::string name;                  // modelzoo's class name, e.g. "AdamW"
  std::vector<std::string> keys;     // its own hyper-parameter keys
  std::string defaults;              // YAML mapping: its defaults for those keys
  std::optional<double> default_lr;  // torch's default lr (none for SGD)
  // Bytes of optimizer state it keeps per trained parameter (float32), as
  // configured: what validate_only and the parallel strategies' memory
  // figures count.
  double (*state_bytes)(const OptimizerConfig&);
  std::unique_ptr<Optimizer> (*make)(std::vector<ParamGroup>, const OptimizerConfig&);
  // Its update of each weight reads only that weight's gradient and state,
  // so it runs on flat shards (full sharding); Lamb's per-tensor trust ratio
  // and Adafactor's factored, per-tensor moments do not.
  bool elementwise = true;
  // A common key or one of its own.
  bool takes(const std::string& key) const;
};

const std::vector<OptimizerEntry>& optimizer_registry();
// Case-insensitive; nullptr when unknown.
const OptimizerEntry* find_optimizer(const std::string& name);
// Keys every optimizer takes (learning rate, weight decay, clipping, accumulation, loss scaling).
const std::vector<std::string>& common_optimizer_keys();

}  // namespace zoo::optim
