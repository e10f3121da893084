// Data processors register here by their modelzoo `data_processor` name. A
// processor parses its input section once into an InputSpec: typed, frozen
// options that open the data and name the features its batches hold.
// Defines: InputSpec, DataProcessor, make_data_processor, find_data_processor,
// parse_input, open_input, data_processors, is_eval_section, open_map_style.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "configs/schema/schema.h"
#include "data/loader.h"

namespace zoo::data {

class InputSpec {
 public:
  virtual ~InputSpec() = default;
  virtual const std::string& processor() const = 0;
  // Every option resolved, data_processor included.
  virtual YAML::Node to_yaml() const = 0;
  // Opens the data; throws config::ConfigError naming the key and file on bad data.
  virtual std::unique_ptr<DataLoader> open() const = 0;
  // Feature names of its batches.
  virtual const std::vector<std::string>& produces() const = 0;
  virtual int64_t batch_size() const = 0;
  // Tokens per sample when the params say (max_sequence_length), else unset.
  virtual std::optional<int64_t> sequence_length() const { return std::nullopt; }
  const config::Origin& origin() const { return origin_; }

 protected:
  config::Origin origin_;
};

struct DataProcessor {
  std::string name;
  std::string doc;
  std::vector<std::string> produces;
  // Reads an input section; throws config::ConfigError naming file, line and key.
  std::function<std::shared_ptr<const InputSpec>(const YAML::Node&, const config::Context&)> parse;
  std::vector<config::FieldInfo> fields;
};

// Options: an options struct with a schema (and batch_size); the opener
// gets the parsed options and where their keys stood, for messages.
template <class Options>
using Opener = std::function<std::unique_ptr<DataLoader>(const Options&, const config::Origin&)>;

// The features a processor's batches hold when its options decide them.
template <class Options>
using ProducesFor = std::function<std::vector<std::string>(const Options&)>;

template <class Options>
class TypedInputSpec : public InputSpec {
 public:
  TypedInputSpec(std::string name, std::vector<std::string> produces, Opener<Options> opener, const YAML::Node& section,
                 const config::Context& ctx, const ProducesFor<Options>& produces_for = {})
      : name_(std::move(name)), produces_(std::move(produces)), open_(std::move(opener)) {
    options_ = Options::schema().parse(section, ctx, nullptr, &origin_);
    if (produces_for) produces_ = produces_for(options_);
  }
  const Options& options() const { return options_; }
  const std::string& processor() const override { return name_; }
  YAML::Node to_yaml() const override { return Options::schema().to_yaml(options_); }
  std::unique_ptr<DataLoader> open() const override {
    try {
      return open_(options_, origin_);
    } catch (const LoaderOptionError& e) {
      origin_.fail(e.key, e.what());
    }
  }
  const std::vector<std::string>& produces() const override { return produces_; }
  int64_t batch_size() const override { return options_.batch_size; }
  std::optional<int64_t> sequence_length() const override {
    if constexpr (config::has_max_sequence_length<Options>::value) return options_.max_sequence_length;
    return std::nullopt;
  }

 private:
  std::string name_;
  std::vector<std::string> produces_;
  Opener<Options> open_;
  Options options_;
};

// produces: every feature it may yield (for --help-config); produces_for,
// when given, the ones a parsed section yields.
template <class Options>
DataProcessor make_data_processor(std::string name, std::string doc, std::vector<std::string> produces,
                                  Opener<Options> open, ProducesFor<Options> produces_for = {}) {
  DataProcessor p;
  p.name = name;
  p.doc = std::move(doc);
  p.produces = produces;
  p.fields = Options::schema().describe();
  p.parse = [name, produces, open, produces_for](const YAML::Node& section, const config::Context& ctx) {
    return std::make_shared<const TypedInputSpec<Options>>(name, produces, open, section, ctx, produces_for);
  };
  return p;
}

// The processor named by section["data_processor"]; ConfigError when it is
// missing or unknown (listing the known names).
const DataProcessor& find_data_processor(const YAML::Node& section, const config::Context& ctx);
std::vector<const DataProcessor*> data_processors();
// find_data_processor(...).parse(...), and that opened (tools and tests).
std::shared_ptr<const InputSpec> parse_input(const YAML::Node& section, const config::Context& ctx);
std::unique_ptr<DataLoader> open_input(const YAML::Node& section, const config::Context& ctx);

// Checks a data_dir entry is a directory: ConfigError naming the key otherwise.
std::string require_directory(const std::string& dir, const config::Origin& at);
// Whether `at` is an eval section (eval_input, or the Trainer format's
// val_dataloader), for processors that read another split there.
bool is_eval_section(const config::Origin& at);
// The map-style loader of the source `make` builds from the section's one
// data_dir directory (`what`: what that directory holds, for messages) and
// whether it is an eval section; its std::runtime_error is reported at data_dir.
std::unique_ptr<DataLoader> open_map_style(
    const LoaderOptions& options, const config::Origin& at, const std::string& what,
    const std::function<std::shared_ptr<SampleSource>(const std::string& dir, bool eval)>& make);

// Sorted regular files in `dir` whose names end with `suffix`.
std::vector<std::string> list_files(const std::string& dir, const std::string& suffix);

}  // namespace zoo::data
