// modelzoo's Trainer format (modelzoo 2.3+, `cszoo fit`): a params file whose
// top level is `trainer:` with init (backend, model, optimizer, schedulers,
// precision, loop, checkpoint, logging, callbacks, loggers), fit, validate and
// validate_all. zoo reads it into the same specs as a legacy params file: the
// Trainer file's nodes are rearranged into the legacy layout (so every error
// still points at the user's line), and a table of path aliases makes the
// messages name the Trainer keys the user wrote. One mapping table serves
// both directions; `zoo config convert-legacy` is the other one.
// Defines: is_trainer_format, LegacyView, to_legacy, from_legacy.
#pragma once

#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>

#include "configs/schema/schema.h"

namespace zoo::trainer_format {

bool is_trainer_format(const YAML::Node& root);

struct LegacyView {
  YAML::Node root;                                     // train_input, eval_input, model, optimizer, runconfig
  std::shared_ptr<const config::PathAliases> aliases;  // legacy key path -> Trainer key path
};

// `mode` picks the evaluation data and checkpoint: fit's for train and
// train_and_eval, validate's for eval, validate_all's for eval_all.
// Cerebras-only parts (cluster_config, CSX callbacks) add one warning each
// to ctx.warnings; anything else zoo cannot honour is a ConfigError.
LegacyView to_legacy(const YAML::Node& root, const config::Context& ctx, const std::string& mode);

// The Trainer form of a legacy params file (as written, not resolved; keys
// that only apply to Cerebras systems and have no Trainer place are dropped
// with a warning).
YAML::Node from_legacy(const YAML::Node& legacy, const config::Context& ctx);

}  // namespace zoo::trainer_format
