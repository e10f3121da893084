// Implementation of models/common/freeze.h.
#include "models/common/freeze.h"

#include <regex>
#include <stdexcept>

namespace zoo::models {

std::string check_freeze_patterns(const std::vector<std::string>& patterns) {
  for (const auto& pattern : patterns) try {
      std::regex check(pattern);
    } catch (const std::regex_error& e) {
      return "'" + pattern + "' is not a regular expression (" + e.what() + ")";
    }
  return "";
}

void freeze_matching(torch::nn::Module& model, const std::vector<std::string>& patterns) {
  for (const auto& pattern : patterns) {
    const std::regex re(pattern);
    bool matched = false;
    for (auto& item : model.named_parameters()) {
      const std::string& name = item.key();
      const std::string module = name.substr(0, name.rfind('.'));
      if (std::regex_search(module, re) || std::regex_search(name, re)) {
        item.value().set_requires_grad(false);
        matched = true;
      }
    }
    if (!matched) throw std::invalid_argument("freeze: '" + pattern + "' matches no module of the model");
  }
}

}  // namespace zoo::models
