// One training run per model_dir at a time. Defines: lock_model_dir.
#pragma once

#include <string>

namespace zoo {

// Takes an advisory lock (flock) on DIR/zoo_run.lock for the rest of the
// process, writing this run's pid, host and mode into it. The kernel drops
// the lock when the process ends, killed or not, so a stale file never
// blocks. Throws std::runtime_error naming the holder's pid when another
// run holds it.
void lock_model_dir(const std::string& dir, const std::string& mode);

}  // namespace zoo
