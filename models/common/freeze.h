// modelzoo's `freeze` lists (freeze_modules): regular expressions over a
// model's module and parameter names; what they match does not train.
// Defines: check_freeze_patterns, freeze_matching.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace zoo::models {

// The first pattern that is not a regular expression, with std::regex's
// reason ("" when all are): for a config's validate step.
std::string check_freeze_patterns(const std::vector<std::string>& patterns);

// Stops the gradient of every parameter whose module's name, or own name,
// a pattern finds (std::regex_search, as Python's re.search). A pattern that
// matches nothing throws std::invalid_argument naming it, as modelzoo's does.
void freeze_matching(torch::nn::Module& model, const std::vector<std::string>& patterns);

}  // namespace zoo::models
