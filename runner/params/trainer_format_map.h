// Internal to runner/trainer_format*.cpp: the one table of where each
// Trainer-format key lives in the legacy layout, read in both directions.
// Defines: KeyMap, key_map, CallbackMap, callback_map, present.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace zoo::trainer_format {

// A key that moves one to one: its path below `trainer.` and in the legacy layout.
struct KeyMap {
  std::string trainer, legacy;
};
const std::vector<KeyMap>& key_map();

// A callback or logger that carries a legacy key: {Name: {key: value}}, or
// {Name: {}} / {Name: true} for a flag (key "").
struct CallbackMap {
  std::string list, name, key, legacy;
};
const std::vector<CallbackMap>& callback_map();

inline bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

}  // namespace zoo::trainer_format
