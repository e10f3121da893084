// The list of built-in model families. Adding a family: a folder under
// models/ exposing a `ModelFamily <name>_family()`, and one line below.
#include "models/registry.h"

#include <stdexcept>

#include "models/gpt2/gpt2.h"

namespace zoo::models {

std::vector<const ModelFamily*> model_families() {
  static const std::vector<ModelFamily> families = {gpt2_family()};
  std::vector<const ModelFamily*> out;
  for (const auto& f : families) out.push_back(&f);
  return out;
}

const ModelFamily& find_model(const std::string& name) {
  std::string known;
  for (const ModelFamily* f : model_families()) {
    if (f->name == name) return *f;
    for (const auto& a : f->aliases)
      if (a == name) return *f;
    known += (known.empty() ? "" : ", ") + f->name;
    for (const auto& a : f->aliases) known += ", " + a;
  }
  throw std::invalid_argument("unknown model '" + name + "' (known: " + known + ")");
}

}  // namespace zoo::models
