// zoo's entry point, mirroring modelzoo's run(): parse the command line, load
// and validate params, then drive train / eval / train_and_eval / eval_all.
// Defines: run.
#pragma once

#include <string>
#include <vector>

#include "runner/params/params.h"
#include "runner/tools/model_stats.h"  // summarize_model

namespace zoo {

// Returns the process exit code: 0 on success, 1 with a one-line reason on
// stderr otherwise. args excludes the program name.
int run(const std::vector<std::string>& args);

}  // namespace zoo
