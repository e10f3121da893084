// Data processors register here by their modelzoo `data_processor` name.
// Defines: DataProcessor, make_data_processor, find_data_processor, data_processors.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"
#include "runner/config/schema.h"

namespace zoo::data {

struct DataProcessor {
  std::string name;
  std::string doc;
  // Validates an input section; returns every option resolved.
  std::function<YAML::Node(const YAML::Node&, const config::Context&)> validate;
  // Opens the data; throws config::ConfigError naming the key and file on bad data.
  std::function<std::unique_ptr<DataLoader>(const YAML::Node&, const config::Context&)> build;
  std::vector<config::FieldInfo> fields;
};

template <class Options>
DataProcessor make_data_processor(
    std::string name, std::string doc,
    std::function<std::unique_ptr<DataLoader>(const Options&, const YAML::Node&, const config::Context&)> open) {
  DataProcessor p;
  p.name = std::move(name);
  p.doc = std::move(doc);
  p.validate = [](const YAML::Node& section, const config::Context& ctx) {
    return Options::schema().to_yaml(Options::schema().parse(section, ctx));
  };
  p.build = [open](const YAML::Node& section, const config::Context& ctx) {
    return open(Options::schema().parse(section, ctx), section, ctx);
  };
  p.fields = Options::schema().describe();
  return p;
}

// The processor named by section["data_processor"]; ConfigError when it is
// missing or unknown (listing the known names).
const DataProcessor& find_data_processor(const YAML::Node& section, const config::Context& ctx);
std::vector<const DataProcessor*> data_processors();

// Resolves a data_dir entry and checks it is a directory: ConfigError naming the key otherwise.
std::string require_directory(const std::string& dir, const YAML::Node& section, const config::Context& ctx);
// Sorted regular files in `dir` whose names end with `suffix`.
std::vector<std::string> list_files(const std::string& dir, const std::string& suffix);

}  // namespace zoo::data
