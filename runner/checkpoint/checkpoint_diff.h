// `zoo checkpoint diff A B`: two checkpoints flattened to named entries
// (model.<key>, optimizer.state.<i>.<name>, global_step, ...) and compared
// tensor by tensor: keys in one only, shape or dtype mismatches, and for the
// rest the largest absolute difference and the mean squared error, equal or
// within rtol/atol as torch.allclose. Exit 0 when every entry is equal (or
// close), 1 otherwise: usable in CI.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace zoo::ckpt {

struct CheckpointDiffCommand {
  std::string a, b;    // checkpoint files (a sharded checkpoint's index, a torch.save'd file)
  double rtol = 1e-5;  // torch.allclose's defaults
  double atol = 1e-8;
  bool exact = false;     // equal only, no tolerance
  std::string keys;       // ECMAScript regex an entry's name must contain a match of ("": all)
  bool metadata = false;  // also compare "__metadata__" (the params YAML, which names the model_dir)
};

struct EntryDiff {
  enum class Status { equal, close, differs, only_in_a, only_in_b, mismatch };
  std::string name;
  Status status = Status::equal;
  std::string detail;  // what differs for mismatches and non-tensor values
  double max_abs = 0;  // tensors of equal shape and dtype
  double mse = 0;
};

struct CheckpointDiff {
  std::vector<EntryDiff> entries;  // every entry compared, sorted by name
  bool same() const;               // every entry equal or close
};

// Throws std::runtime_error naming a file that cannot be read, or a bad regex.
CheckpointDiff diff_checkpoints(const CheckpointDiffCommand& command);

// The entries that are not equal, one line each, then a count by status and the verdict.
void describe(const CheckpointDiff& diff, const CheckpointDiffCommand& command, std::ostream& out);

}  // namespace zoo::ckpt
