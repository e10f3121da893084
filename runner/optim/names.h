// The optimizer_type names zoo implements (lower case). Kept apart from
// optimizer.h so config validation needs no LibTorch. Defines: optimizer_names.
#pragma once

#include <string>
#include <vector>

namespace zoo::optim {

inline const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = {"sgd",     "adam",  "adamw", "adamax", "adadelta",
                                                 "adagrad", "asgd",  "lamb",  "lion",   "nadam",
                                                 "radam",   "rmsprop", "rprop", "adafactor"};
  return names;
}

}  // namespace zoo::optim
