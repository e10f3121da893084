// LoRA (models/common/lora.h) on a tiny LLaMA converted from Hugging Face:
// with B = 0 the base model's logits exactly; the adapters' gradients
// against a float64 Python forward of PEFT's math; merged weights against
// unmerged; modelzoo's target_modules rule; PEFT adapters exported and
// imported bit for bit, and refused for another base model.
#include <gtest/gtest.h>

#include <random>

#include "convert_fixtures.h"
#include "models/common/lora.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/convert/convert.h"
#include "runner/convert/peft.h"
#include "runner/convert/safetensors.h"
#include "runner/model_guards.h"
#include "test_util.h"

namespace zoo {
namespace {

using testing::TempDir;

const std::string kMakeLlama = testing::oracle("convert_llama_make_llama.py");

// dir/hf: a tiny LLaMA (grouped-query attention, half-split rotary, SwiGLU)
// from the published math; dir/zoo: zoo's conversion of it.
void make_converted_llama(const TempDir& dir, int64_t intermediate = 48) {
  testing::write_file(dir / "case.json", nlohmann::json{{"model_type", "llama"},
                                                        {"rope_scaling", nullptr},
                                                        {"head_dim", nullptr},
                                                        {"experts", 0},
                                                        {"bias", ""},
                                                        {"theta", 10000.0},
                                                        {"rope_parameters", false}}
                                             .dump());
  std::string script = kMakeLlama;
  if (intermediate != 48)
    script.replace(script.find("P, eps = 40, 32, 4, 2, 2, 48"), 28,
                   "P, eps = 40, 32, 4, 2, 2, " + std::to_string(intermediate));
  testing::run_fixture(dir, "make_llama.py", script);
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});
}

// The converted params with `lora` (YAML) as model.lora_params.
Params lora_params(const TempDir& dir, const std::string& lora) {
  YAML::Node y = YAML::LoadFile(dir / "zoo/params.yaml");
  y["model"]["lora_params"] = YAML::Load(lora);
  return params_from_node(y, dir / "zoo/params.yaml", YAML::Node());
}

std::shared_ptr<models::Model> load_base(const TempDir& dir, const Params& params) {
  auto model = params.model->build(torch::TensorOptions());
  ckpt::load_model_state_dict(
      *model, ckpt::load_checkpoint_file(dir / "zoo/checkpoint_0.mdl").at("model").toGenericDict(), true, "converted");
  return model;
}

torch::Tensor logits_of(models::Model& model, const torch::Tensor& ids) {
  torch::NoGradGuard no_grad;
  models::GenerationCache cache;
  return model.next_logits(ids, cache);
}

// Random B (A keeps its Kaiming init), so both matrices have a gradient.
void randomize_b(models::Model& model) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  for (const auto& [path, layer] : models::lora_layers(model)) layer->lora_B.normal_(0.0, 0.3);
}

const char* kAllLayers = "{r: 4, alpha: 8}";

// The converted tiny LLaMA with the adapters `lora` gives, B random.
struct AdaptedLlama {
  TempDir dir;
  Params params;
  std::shared_ptr<models::Model> model;
  torch::Tensor ids;
  explicit AdaptedLlama(const std::string& lora) {
    make_converted_llama(dir);
    params = lora_params(dir, lora);
    model = load_base(dir, params);
    models::apply_lora(*model, params.lora);
    randomize_b(*model);
    ids = testing::read_raw(dir / "ids.bin", torch::kLong, {2, 16});
  }
};

TEST(Lora, ZeroBLeavesTheBaseModelsLogitsExactlyAndOnlyAdaptersTrain) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  TempDir dir;
  make_converted_llama(dir);
  const Params params = lora_params(dir, kAllLayers);
  auto model = load_base(dir, params);
  const torch::Tensor ids = testing::read_raw(dir / "ids.bin", torch::kLong, {2, 16});
  const torch::Tensor base = logits_of(*model, ids);
  const auto layers = models::apply_lora(*model, params.lora);
  EXPECT_EQ(layers.size(), 2u * 7u);  // q, k, v, o, gate, up, down in each of 2 layers
  EXPECT_TRUE(torch::equal(logits_of(*model, ids), base)) << "B = 0 must leave the model's function as it was";
  int64_t trained = 0;
  for (const auto& p : model->named_parameters()) {
    const bool adapter = p.key().find(".lora_") != std::string::npos;
    EXPECT_EQ(p.value().requires_grad(), adapter) << p.key();
    if (adapter) trained += p.value().numel();
  }
  // r (in + out) per layer: q 32+32, k 32+16, v 32+16, o 32+32, gate/up 32+48, down 48+32.
  EXPECT_EQ(trained, 4 * (64 + 48 + 48 + 64 + 80 + 80 + 80) * 2);
  for (const auto& [path, layer] : layers) {
    EXPECT_EQ(layer->lora_A.scalar_type(), torch::kFloat);
    EXPECT_TRUE(torch::equal(layer->lora_B, torch::zeros_like(layer->lora_B))) << path;
    const double bound = 1.0 / std::sqrt(static_cast<double>(layer->lora_A.size(1)));  // Kaiming-uniform, a = sqrt(5)
    EXPECT_LE(layer->lora_A.abs().max().item<double>(), bound) << path;
    EXPECT_GT(layer->lora_A.abs().max().item<double>(), 0.8 * bound) << path;
    EXPECT_DOUBLE_EQ(layer->lora_scaling, 2.0);
  }
}

TEST(Lora, AdapterGradientsMatchAFloat64PythonReference) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  // Different ranks and alphas per kind, as lists of groups give them.
  AdaptedLlama a("[{r: 4, alpha: 8, target_modules: [self_attn]}, {r: 2, alpha: 3, target_modules: [down_proj]}]");
  auto& [dir, params, model, ids] = a;
  model->train();
  models::Features batch{{"input_ids", ids.narrow(1, 0, 15)},
                         {"labels", ids.narrow(1, 1, 15)},
                         {"attention_mask", torch::ones({2, 15}, torch::kLong)}};
  const torch::Tensor loss = -model->label_log_likelihood(batch, /*average=*/true).mean();
  loss.backward();

  // The adapters (and, in the same layout, their gradients) as PEFT files, which the reference reads.
  const auto layers = convert::adapter_layers(*params.model, params.lora);
  ASSERT_EQ(layers.size(), 2u * 5u);
  models::StateDict state, grads;
  for (const auto& p : model->named_parameters())
    if (p.key().find(".lora_") != std::string::npos) {
      state[p.key()] = p.value().detach();
      grads[p.key()] = p.value().grad();
    }
  convert::write_peft_adapter(dir / "adapter", "llama", *params.model, layers, state, "");
  convert::write_peft_adapter(dir / "zoo_grads", "llama", *params.model, layers, grads, "");
  auto r = testing::run_command(
      testing::fixture_python() + " " +
      testing::write_file(dir / "reference.py", testing::kPySafetensors + testing::oracle("lora_llama_reference.py")) +
      " " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NEAR(loss.item<double>(), std::stod(testing::read_file(dir / "ref_loss.txt")), 1e-5);
  const auto ours = convert::read_safetensors(dir / "zoo_grads/adapter_model.safetensors");
  const auto reference = convert::read_safetensors(dir / "ref_grads.safetensors");
  ASSERT_EQ(ours.size(), reference.size());
  for (const auto& [key, g] : reference) {
    ASSERT_TRUE(ours.count(key)) << key;
    EXPECT_GT(g.abs().max().item<double>(), 1e-4) << key << ": a gradient that is zero proves nothing";
    EXPECT_LT((ours.at(key) - g).abs().max().item<double>(), 1e-5) << key;
  }
}

TEST(Lora, MergedWeightsGiveTheUnmergedLogitsAndComeBackUntouched) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  AdaptedLlama a("{r: 4, alpha: 8, merge_weights: true}");
  auto& [dir, params, model, ids] = a;
  const torch::Tensor unmerged = logits_of(*model, ids);
  std::map<std::string, torch::Tensor> before;
  for (const auto& p : model->named_parameters()) before[p.key()] = p.value().clone();
  {
    const models::LoraMergeGuard merged(*model);
    const torch::Tensor folded = logits_of(*model, ids);
    EXPECT_LT((folded - unmerged).abs().max().item<double>(), 1e-5);
    EXPECT_GT((unmerged - logits_of(*load_base(dir, params), ids)).abs().max().item<double>(), 1e-2)
        << "the adapters should change the model, or the comparison proves nothing";
  }
  for (const auto& p : model->named_parameters()) EXPECT_TRUE(torch::equal(p.value(), before[p.key()])) << p.key();
  EXPECT_TRUE(torch::equal(logits_of(*model, ids), unmerged));
}

TEST(Lora, TargetModulesFollowModelzoosRule) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  TempDir dir;
  make_converted_llama(dir);
  auto adapted = [&](const std::string& lora) {
    const Params params = lora_params(dir, lora);
    auto model = params.model->build(torch::TensorOptions().device(torch::kMeta));
    std::vector<std::string> paths;
    for (const auto& l : models::apply_lora(*model, params.lora)) paths.push_back(l.path);
    return paths;
  };
  const std::string layer0 = "transformer_decoder.layers.0.";
  // Every name must be among the layer's: a class name and PEFT's name, a path part and a class name.
  EXPECT_EQ(adapted("{target_modules: [MultiheadAttention, v_proj]}"),
            (std::vector<std::string>{layer0 + "self_attn.proj_v_dense_layer",
                                      "transformer_decoder.layers.1.self_attn.proj_v_dense_layer"}));
  EXPECT_EQ(adapted("{target_modules: [FeedForwardNetwork, Linear]}").size(), 2u * 3u);
  EXPECT_EQ(adapted("{target_modules: [proj_output_dense_layer]}").size(), 2u);
  // The first group that matches a layer gives it its adapter.
  const Params two = lora_params(dir, "[{r: 2, target_modules: [q_proj]}, {r: 6, target_modules: [self_attn]}]");
  auto model = two.model->build(torch::TensorOptions().device(torch::kMeta));
  for (const auto& l : models::apply_lora(*model, two.lora))
    EXPECT_EQ(l.layer->lora_A.size(0), l.path.find("proj_q") != std::string::npos ? 2 : 6) << l.path;
  try {
    adapted("{target_modules: [q_proj, v_proj]}");
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("lora_params.target_modules: [q_proj, v_proj] matches no dense layer"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("give one group per name"), std::string::npos) << e.what();
  }
  // build_model names the params file and key.
  YAML::Node y = YAML::LoadFile(dir / "zoo/params.yaml");
  y["model"]["lora_params"] = YAML::Load("{target_modules: [Conv2d]}");
  const Params bad = params_from_node(y, "ft.yaml", YAML::Node());
  testing::expect_refused([&] { build_model(bad, torch::Device(torch::kCPU)); },
                          {"ft.yaml: model.lora_params.target_modules: [Conv2d] matches no dense layer"});
}

// A LoRA checkpoint as the trainer saves one: the base's weights, the adapters and the params.
std::string save_lora_checkpoint(const TempDir& dir, models::Model& model, const Params& params) {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("model", ckpt::model_state_dict(model));
  d.insert("global_step", int64_t{5});
  d.insert("__metadata__", ckpt::checkpoint_metadata(params, {{"lora_base", dir / "zoo/checkpoint_0.mdl"}}));
  const std::string path = dir / "lora/checkpoint_5.mdl";
  std::filesystem::create_directories(dir / "lora");
  ckpt::save_checkpoint_file(path, d);
  return path;
}

TEST(LoraConvert, PeftAdapterExportsAndImportsBitForBitBesideTheMergedModel) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  AdaptedLlama a(
      "[{r: 4, alpha: 8, target_modules: [self_attn]}, {r: 2, alpha: 3, target_modules: [FeedForwardNetwork]}]");
  auto& [dir, params, model, ids] = a;
  const std::string saved = save_lora_checkpoint(dir, *model, params);
  convert::run_convert({saved, "llama", "zoo", "hf", std::nullopt, dir / "export"});
  const auto cfg = nlohmann::json::parse(testing::read_file(dir / "export/adapter/adapter_config.json"));
  EXPECT_EQ(cfg["peft_type"], "LORA");
  EXPECT_EQ(cfg["r"], 4);
  EXPECT_EQ(cfg["lora_alpha"], 8.0);
  EXPECT_EQ(cfg["target_modules"],
            nlohmann::json({"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"}));
  EXPECT_EQ(cfg["rank_pattern"]["model.layers.1.mlp.down_proj"], 2);
  EXPECT_EQ(cfg["alpha_pattern"]["model.layers.0.mlp.up_proj"], 3.0);
  EXPECT_EQ(cfg["base_model_name_or_path"], dir / "zoo/checkpoint_0.mdl");
  const auto tensors = convert::read_safetensors(dir / "export/adapter/adapter_model.safetensors");
  EXPECT_EQ(tensors.size(), 2u * 7u * 2u);
  EXPECT_EQ(tensors.at("base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight").sizes(),
            torch::IntArrayRef({16, 4}));

  // The merged model back in zoo computes what the adapted one does.
  convert::run_convert({dir / "export", "", "hf", "zoo", std::nullopt, dir / "merged"});
  Params merged_params = load_params(dir / "merged/params.yaml", YAML::Node());
  auto merged = merged_params.model->build(torch::TensorOptions());
  ckpt::load_model_state_dict(
      *merged, ckpt::load_checkpoint_file(dir / "merged/checkpoint_0.mdl").at("model").toGenericDict(), true, "merged");
  EXPECT_LT((logits_of(*merged, ids) - logits_of(*model, ids)).abs().max().item<double>(), 1e-5);

  // Imported onto the base again: the same adapters, bit for bit, and the same lora_params.
  convert::ConvertCommand import{dir / "export/adapter", "", "peft", "zoo", std::nullopt, dir / "imported"};
  import.base_checkpoint = dir / "zoo/checkpoint_0.mdl";
  convert::run_convert(import);
  const Params imported = load_params(dir / "imported/params.yaml", YAML::Node());
  ASSERT_EQ(imported.lora.size(), 7u);  // one group per kind of layer
  auto back = imported.model->build(torch::TensorOptions());
  models::apply_lora(*back, imported.lora);
  ckpt::load_model_state_dict(*back,
                              ckpt::load_checkpoint_file(dir / "imported/checkpoint_0.mdl").at("model").toGenericDict(),
                              true, "imported");
  std::map<std::string, torch::Tensor> original;
  for (const auto& p : model->named_parameters()) original[p.key()] = p.value();
  int64_t compared = 0;
  for (const auto& p : back->named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value(), original.at(p.key()))) << p.key();
    compared += p.key().find(".lora_") != std::string::npos;
  }
  EXPECT_EQ(compared, 2 * 7 * 2);
  EXPECT_TRUE(torch::equal(logits_of(*back, ids), logits_of(*model, ids)));

  // PEFT matches rank_pattern / alpha_pattern keys as a module name's end, or a regex on it: the same adapter.
  auto config = nlohmann::json::parse(testing::read_file(dir / "export/adapter/adapter_config.json"));
  config["rank_pattern"] = {{"down_proj", 2}, {"gate_proj", 2}, {"up_proj", 2}};
  config["alpha_pattern"] = {{"mlp\\..*_proj", 3.0}};
  testing::write_file(dir / "export/adapter/adapter_config.json", config.dump());
  import.output_dir = dir / "imported_patterns";
  convert::run_convert(import);
  const Params patterned = load_params(dir / "imported_patterns/params.yaml", YAML::Node());
  ASSERT_EQ(patterned.lora.size(), imported.lora.size());
  for (size_t g = 0; g < imported.lora.size(); ++g) {
    EXPECT_EQ(patterned.lora[g].r, imported.lora[g].r) << g;
    EXPECT_EQ(patterned.lora[g].alpha, imported.lora[g].alpha) << g;
  }
  // An adapter holding NaN is refused by name, as is a rank that is no rank.
  auto tensors_nan = convert::read_safetensors(dir / "export/adapter/adapter_model.safetensors");
  const std::string poisoned = "base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight";
  tensors_nan[poisoned] = tensors_nan[poisoned].clone();
  tensors_nan[poisoned][0][0] = std::nan("");
  convert::write_safetensors(dir / "export/adapter/adapter_model.safetensors", tensors_nan, {{"format", "pt"}});
  import.output_dir = dir / "imported_nan";
  testing::expect_refused([&] { convert::run_convert(import); }, {poisoned + " holds NaN or infinite values"});
  config["r"] = 1000000;
  testing::write_file(dir / "export/adapter/adapter_config.json", config.dump());
  testing::expect_refused([&] { convert::run_convert(import); },
                          {"adapter_config.json: r: 1000000 is not a rank from 1 to 65536"});
}

// Seeded mutations of a PEFT adapter_config.json (values of other types and sizes, patterns that are not regexes,
// ranks and alphas out of range): each imports, or is refused naming the file; never a crash.
TEST(LoraConvert, MutatedAdapterConfigsImportOrAreRefused) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  AdaptedLlama a(
      "[{r: 4, alpha: 8, target_modules: [self_attn]}, {r: 2, alpha: 3, target_modules: [FeedForwardNetwork]}]");
  auto& [dir, params, model, ids] = a;
  convert::run_convert({save_lora_checkpoint(dir, *model, params), "llama", "zoo", "hf", std::nullopt, dir / "export"});
  const auto original = nlohmann::json::parse(testing::read_file(dir / "export/adapter/adapter_config.json"));
  const std::vector<nlohmann::json> values = {nullptr,
                                              -1,
                                              0,
                                              2,
                                              4,
                                              1e308,
                                              std::nan(""),
                                              "8",
                                              "(",
                                              "[q_",
                                              true,
                                              nlohmann::json::array(),
                                              nlohmann::json::object(),
                                              {{"q_proj", 4}},
                                              {{"(", 2}},
                                              {{".*", "x"}},
                                              {{"down_proj", -3}},
                                              4294967296LL,
                                              "LORA",
                                              "none",
                                              "all"};
  const std::vector<std::string> keys = {
      "r",    "lora_alpha", "lora_dropout", "rank_pattern",   "alpha_pattern",   "peft_type",
      "bias", "use_rslora", "use_dora",     "fan_in_fan_out", "modules_to_save", "target_modules"};
  std::mt19937_64 rng(59);
  int imported = 0, refused = 0;
  for (int n = 0; n < 60; ++n) {
    nlohmann::json config = original;
    for (int edits = 1 + static_cast<int>(rng() % 2); edits > 0; --edits)
      config[keys[rng() % keys.size()]] = values[rng() % values.size()];
    if (rng() % 10 == 0) config = values[rng() % values.size()];
    testing::write_file(dir / "export/adapter/adapter_config.json",
                        config.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    convert::ConvertCommand import{
        dir / "export/adapter", "", "peft", "zoo", std::nullopt, dir / ("imported" + std::to_string(n))};
    import.base_checkpoint = dir / "zoo/checkpoint_0.mdl";
    try {
      convert::run_convert(import);
      ++imported;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("adapter"), std::string::npos) << config.dump() << ": " << e.what();
      ++refused;
    }
  }
  EXPECT_GT(imported, 3);
  EXPECT_GT(refused, 10);
}

TEST(LoraConvert, AnAdapterForAnotherBaseModelIsRefusedByName) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  TempDir dir, other;
  make_converted_llama(dir);
  make_converted_llama(other, /*intermediate=*/40);
  const Params params = lora_params(dir, "{r: 4, target_modules: [up_proj]}");
  auto model = load_base(dir, params);
  models::apply_lora(*model, params.lora);
  convert::run_convert({save_lora_checkpoint(dir, *model, params), "llama", "zoo", "hf", std::nullopt, dir / "export"});
  convert::ConvertCommand import{dir / "export/adapter", "", "peft", "zoo", std::nullopt, other / "imported"};
  import.base_checkpoint = other / "zoo/checkpoint_0.mdl";
  testing::expect_refused(
      [&] { convert::run_convert(import); },
      {"adapter_model.safetensors: base_model.model.model.layers.0.mlp.up_proj.lora_B.weight has shape",
       "the adapter was made for another base model"});
  EXPECT_FALSE(std::filesystem::exists(other / "imported/checkpoint_0.mdl"));
  // Without the base, or onto a LoRA checkpoint, the import says what it needs.
  convert::ConvertCommand no_base{dir / "export/adapter", "", "peft", "zoo", std::nullopt, dir / "x"};
  testing::expect_refused([&] { convert::run_convert(no_base); }, {"pass --base-checkpoint"});
}

}  // namespace
}  // namespace zoo
