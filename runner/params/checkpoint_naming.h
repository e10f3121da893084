// How a run names its checkpoint files: modelzoo's Trainer key
// checkpoint.checkpoint_name, a file name template with one `{step}` field
// (also `{step:d}`, or `{step:08d}` zero-padded as Python's str.format pads
// it). zoo appends `_<YYYYmmdd_HHMMSS>` after the step when the plain name
// is taken, so a checkpoint is never overwritten. Defines: CheckpointNaming.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <utility>

namespace zoo::ckpt {

class CheckpointNaming {
 public:
  static constexpr const char* kDefault = "checkpoint_{step}.mdl";

  CheckpointNaming() : CheckpointNaming(kDefault) {}
  // Throws std::invalid_argument saying what is wrong with `name_template`.
  explicit CheckpointNaming(const std::string& name_template);
  // "" when `name_template` is a valid template, else what was expected.
  static std::string check(const std::string& name_template);

  // The file name for `step`, with `_<timestamp>` after the step when given.
  std::string file_name(int64_t step, const std::string& timestamp = "") const;
  // (step digits, timestamp or "") of a file name this template makes.
  std::optional<std::pair<std::string, std::string>> match(const std::string& file_name) const;

 private:
  std::string prefix_, suffix_;
  int width_ = 0;       // minimum digits, zero-padded
  std::regex pattern_;  // the names file_name makes, with or without a timestamp
};

}  // namespace zoo::ckpt
