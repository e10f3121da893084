// The list of built-in data processors. Adding one: expose a
// `DataProcessor <name>_processor()` and add one line below.
#include "data/registry.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "data/processors/alphabet.h"
#include "data/processors/bert_csv.h"
#include "data/processors/bert_hdf5.h"
#include "data/processors/bert_mlm.h"
#include "data/processors/bert_qa.h"
#include "data/processors/bertsum.h"
#include "data/processors/byte_text.h"
#include "data/processors/cityscapes.h"
#include "data/processors/diffusion.h"
#include "data/processors/dpo_hdf5.h"
#include "data/processors/dpr_hdf5.h"
#include "data/processors/glue.h"
#include "data/processors/gpt_hdf5.h"
#include "data/processors/imagenet.h"
#include "data/processors/inria.h"
#include "data/processors/llava_hdf5.h"
#include "data/processors/mnist.h"
#include "data/processors/ner.h"
#include "data/processors/seq2seq_text.h"
#include "data/processors/severstal.h"
#include "data/processors/skm.h"
#include "data/processors/synthetic.h"
#include "data/processors/unet_hdf5.h"

namespace zoo::data {

std::vector<const DataProcessor*> data_processors() {
  static const std::vector<DataProcessor> all = {byte_text_processor(),
                                                 gpt_hdf5_processor(),
                                                 gpt_hdf5_map_processor(),
                                                 dpo_hdf5_processor(),
                                                 llava_hdf5_processor(),
                                                 multimodal_simple_hdf5_processor(),
                                                 dpr_hdf5_processor(),
                                                 synthetic_processor(),
                                                 mnist_processor(),
                                                 severstal_processor(),
                                                 cityscapes_processor(),
                                                 inria_processor(),
                                                 unet_hdf5_processor(),
                                                 skm_processor(),
                                                 imagenet_processor(),
                                                 diffusion_latent_processor(),
                                                 diffusion_synthetic_processor(),
                                                 bert_mlm_processor(),
                                                 bert_hdf5_processor(),
                                                 bert_csv_processor(),
                                                 bert_csv_static_processor(),
                                                 sst2_processor(),
                                                 mnli_processor(),
                                                 ner_processor(),
                                                 bert_qa_processor(),
                                                 bertsum_processor(),
                                                 t5_text_processor(),
                                                 transformer_text_processor(),
                                                 alphabet_processor()};
  std::vector<const DataProcessor*> out;
  for (const auto& p : all) out.push_back(&p);
  return out;
}

const DataProcessor& find_data_processor(const YAML::Node& section, const config::Context& ctx) {
  if (!section.IsDefined() || section.IsNull() || !section.IsMap())
    ctx.fail(section, "", "expected a mapping with a data_processor key");
  YAML::Node name = section["data_processor"];
  if (!name || !name.IsScalar())
    ctx.fail(name ? name : section, "data_processor", "required: the data processor name (a string)");
  std::vector<std::string> names;
  for (const DataProcessor* p : data_processors()) {
    if (p->name == name.Scalar()) return *p;
    names.push_back(p->name);
  }
  // modelzoo processors zoo refuses, and why.
  static const std::map<std::string, std::string> refused = {
      {"DiffusionImageNet1KProcessor",
       "feeds DiT images, which the model would have to encode with its VAE; modelzoo's DiT does not build that "
       "either: write latents with modelzoo's create_imagenet_latents.py and read them with "
       "DiffusionLatentImageNet1KProcessor"}};
  if (auto it = refused.find(name.Scalar()); it != refused.end())
    ctx.fail(name, "data_processor", "modelzoo's " + it->first + " is not one zoo has: it " + it->second);
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  ctx.fail(name, "data_processor",
           "unknown data processor '" + name.Scalar() + "'" + config::did_you_mean(name.Scalar(), names) +
               " (known: " + known + ")");
}

namespace {

// `section` without micro_batch_size, or with it set to `value` (nodes keep their lines).
YAML::Node with_micro_batch(const YAML::Node& section, const std::optional<int64_t>& value) {
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& kv : section)
    if (kv.first.Scalar() != "micro_batch_size") out[kv.first] = kv.second;
  if (value) out["micro_batch_size"] = *value;
  return out;
}

std::optional<int64_t> as_int(const YAML::Node& n) {
  if (!n.IsDefined() || !n.IsScalar()) return std::nullopt;
  try {
    return n.as<int64_t>();
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::shared_ptr<const InputSpec> parse_input(const YAML::Node& section, const config::Context& ctx) {
  const YAML::Node micro =
      section.IsMap() && section["micro_batch_size"].IsDefined() ? section["micro_batch_size"] : YAML::Node();
  // micro_batch_size: auto / explore let the Cerebras compiler choose; zoo then runs whole batches.
  if (micro.IsScalar() && (micro.Scalar() == "auto" || micro.Scalar() == "explore")) {
    ctx.warn(micro, "micro_batch_size",
             micro.Scalar() +
                 " asks the Cerebras compiler to choose; zoo runs whole batches (give a number to "
                 "accumulate gradients over micro-batches)");
    const YAML::Node without = with_micro_batch(section, std::nullopt);
    return find_data_processor(without, ctx).parse(without, ctx);
  }
  // A micro-batch size that does not divide the batch (modelzoo asks only
  // that it be at most batch_size): the largest one below it that does. The
  // accumulated gradient is the whole batch's either way.
  const std::optional<int64_t> requested = as_int(micro);
  const std::optional<int64_t> batch = section.IsMap() ? as_int(section["batch_size"]) : std::nullopt;
  if (requested && batch && *requested > 0 && *requested < *batch && *batch % *requested != 0) {
    int64_t size = *requested;
    while (*batch % size != 0) --size;
    ctx.warn(micro, "micro_batch_size",
             std::to_string(*requested) + " does not divide batch_size " + std::to_string(*batch) +
                 ": zoo accumulates micro-batches of " + std::to_string(size) +
                 ", the largest size that divides it and is not above " + std::to_string(*requested));
    const YAML::Node adjusted = with_micro_batch(section, size);
    return find_data_processor(adjusted, ctx).parse(adjusted, ctx);
  }
  return find_data_processor(section, ctx).parse(section, ctx);
}

std::unique_ptr<DataLoader> open_input(const YAML::Node& section, const config::Context& ctx) {
  return parse_input(section, ctx)->open();
}

std::string require_directory(const std::string& dir, const config::Origin& at) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    at.fail("data_dir", "directory '" + dir + "' does not exist (relative paths are taken from the current directory)");
  return dir;
}

bool is_eval_section(const config::Origin& at) {
  const std::string& section = at.context().path;
  return section == "eval_input" || section.find("val_dataloader") != std::string::npos;
}

std::unique_ptr<DataLoader> open_map_style(
    const LoaderOptions& options, const config::Origin& at, const std::string& what,
    const std::function<std::shared_ptr<SampleSource>(const std::string& dir, bool eval)>& make) {
  if (options.data_dir.items.size() != 1) at.fail("data_dir", "required: the one directory holding " + what);
  const std::string dir = require_directory(options.data_dir.items.front(), at);
  std::shared_ptr<SampleSource> source;
  try {
    source = make(dir, is_eval_section(at));
  } catch (const config::ConfigError&) {
    throw;  // already names the file and key
  } catch (const std::runtime_error& e) {
    at.fail("data_dir", e.what());
  }
  return std::make_unique<MapStyleLoader>(source, options);
}

std::vector<std::string> list_files(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string p = e.path().string();
    if (e.is_regular_file() && p.size() >= suffix.size() &&
        p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace zoo::data
