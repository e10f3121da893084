// DiT (models/dit) and its data (data/diffusion, data/npy): the predicted
// noise against a float64 forward written in Python from modelzoo's layers
// (q_sample, patches, 2D sin-cos positions, Glide timestep features,
// adaLN-Zero blocks, the transposed-conv or unpatchify head), the identity
// start of adaLN-Zero, NumPy's .npy/.npz files as NumPy writes them, the
// latent processor's draws, the model-to-data keys, and training from a
// Trainer-format config laid out as modelzoo's DiT files, resumed exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>

#include "data/npy.h"
#include "data/processors/diffusion.h"
#include "models/dit/dit.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

std::shared_ptr<const models::ModelSpec> dit_spec(const std::string& yaml) {
  return models::find_model("dit").parse(YAML::Load(yaml), config::Context{"m.yaml", "model"});
}

// modelzoo's DiT in float64, written from its layers: GaussianDiffusion's
// linear betas scaled by 1000 / steps, ViTEmbeddingLayer's patches and
// get_2d_fixed_position_embeddings, TimestepEmbeddingLayer's Glide features
// and MLP, AdaLayerNorm, DiTDecoderLayer (pre- or post-norm with gates),
// the final AdaLayerNorm and RegressionHead (conv transpose or unpatchify_helper).
const std::string kReferenceDit = zoo::testing::oracle("dit_reference.py");

models::Features dit_batch(int64_t B, int64_t C, int64_t H, int64_t W, int64_t steps, int64_t labels,
                           torch::ScalarType dtype = torch::kDouble) {
  return {{"input", torch::randn({B, C, H, W}, dtype)},
          {"diffusion_noise", torch::randn({B, C, H, W}, dtype)},
          {"timestep", torch::randint(steps, {B}, torch::kLong)},
          {"label", torch::randint(labels, {B}, torch::kLong)}};
}

}  // namespace

TEST(Dit, NoiseMatchesAFloat64ForwardOfModelzoosLayers) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  struct Case {
    std::string yaml, json;
  };
  const std::vector<Case> cases = {
      {"{hidden_size: 16, num_hidden_layers: 2, num_heads: 2, filter_size: 32, layer_norm_epsilon: 1.0e-6, "
       "patch_size: [2, 2], use_conv_patchified_embedding: true, position_embedding_type: fixed, num_classes: 5, "
       "num_diffusion_steps: 50, frequency_embedding_size: 16, label_dropout_rate: 0.1, embedding_dropout_rate: 0.0, "
       "encoder_nonlinearity: gelu, vae: {latent_size: [8, 8], latent_channels: 4}}",
       R"({"patch": 2, "hidden": 16, "heads": 2, "layers": 2, "eps": 1e-6, "steps": 50, "freq": 16, "conv": true,
           "pos": "fixed", "norm_first": true, "conv_head": true, "act": "gelu"})"},
      {"{hidden_size: 12, num_hidden_layers: 1, num_heads: 3, filter_size: 20, patch_size: [2, 2], "
       "latent_size: [4, 6], latent_channels: 3, position_embedding_type: learned, num_classes: 4, "
       "num_diffusion_steps: 2000, frequency_embedding_size: 15, label_dropout_rate: 0.0, "
       "embedding_dropout_rate: 0.0, norm_first: false, use_conv_transpose_unpatchify: false, nonlinearity: relu}",
       R"({"patch": 2, "hidden": 12, "heads": 3, "layers": 1, "eps": 1e-5, "steps": 2000, "freq": 15, "conv": false,
           "pos": "learned", "norm_first": false, "conv_head": false, "act": "relu"})"},
  };
  TempDir dir;
  for (const auto& c : cases) {
    torch::manual_seed(3);
    auto built = dit_spec(c.yaml)->build(torch::TensorOptions().dtype(torch::kDouble));
    auto& model = dynamic_cast<models::DitModel&>(*built);
    model.eval();
    {
      torch::NoGradGuard no_grad;  // away from adaLN-Zero's zeros, so every path counts
      for (auto& p : model.parameters())
        if (p.requires_grad()) p.add_(torch::randn_like(p) * 0.2);
    }
    const auto& proj = model.patch_embedding_layer->proj_weight;
    const bool conv = proj.dim() == 4;
    const int64_t C = conv ? proj.size(1) : 3, H = conv ? 8 : 4, W = conv ? 8 : 6;
    const int64_t steps = conv ? 50 : 2000, labels = model.label_embedding_layer->weight.size(0);
    models::Features batch = dit_batch(3, C, H, W, steps, labels);
    const torch::Tensor t = batch["timestep"], y = batch["label"];
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    d.insert("state", ckpt::model_state_dict(model));
    d.insert("latent", batch["input"]);
    d.insert("noise", batch["diffusion_noise"]);
    d.insert("timestep", t);
    d.insert("label", y);
    d.insert("pred", model.predict_noise(model.add_noise(batch["input"], batch["diffusion_noise"], t), y, t).detach());
    d.insert("loss", model.forward(batch, true).loss.detach());
    const std::string file = dir / "case.pt";
    ckpt::save_checkpoint_file(file, d);
    const std::string script = zoo::testing::write_file(dir / "ref.py", kReferenceDit);
    const auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + file + " '" + c.json + "'");
    EXPECT_EQ(r.exit_code, 0) << c.yaml << "\n" << r.output;
  }
}

// adaLN-Zero: every block and the head start at zero, so a new model predicts
// zero noise (loss = mean noise^2); its keys are modelzoo's and its
// constant tables are in the checkpoint but not trained.
TEST(Dit, StartsPredictingZeroNoiseWithModelzoosKeys) {
  auto spec = dit_spec(
      "{hidden_size: 16, num_hidden_layers: 2, num_heads: 2, filter_size: 32, patch_size: [2, 2], "
      "use_conv_patchified_embedding: true, position_embedding_type: fixed, num_classes: 5, "
      "num_diffusion_steps: 100, frequency_embedding_size: 16, "
      "vae: {latent_size: [8, 8], latent_channels: 4}}");
  torch::manual_seed(0);
  auto model = spec->build(torch::TensorOptions());
  const models::Features batch = dit_batch(4, 4, 8, 8, 100, 6, torch::kFloat);
  const double loss = model->forward(batch, false).loss.item<double>();
  EXPECT_NEAR(loss, batch.at("diffusion_noise").pow(2).mean().item<double>(), 1e-6);

  std::set<std::string> names, frozen;
  for (const auto& p : model->named_parameters()) {
    names.insert(p.key());
    if (!p.value().requires_grad()) frozen.insert(p.key());
  }
  for (const char* key :
       {"patch_embedding_layer.linear_proj.weight", "timestep_embedding_layer.ffn.ffn.0.linear_layer.weight",
        "timestep_embedding_layer.ffn.ffn.1.linear_layer.bias", "label_embedding_layer.weight",
        "transformer_decoder.layers.1.self_attn.proj_q_dense_layer.weight",
        "transformer_decoder.layers.1.norm1.scale_linear.1.weight",
        "transformer_decoder.layers.0.norm3.shift_linear.1.bias", "transformer_decoder.layers.0.gate_msa.1.weight",
        "transformer_decoder.layers.0.gate_mlp.1.bias", "transformer_decoder.layers.0.ffn.ffn.1.linear_layer.weight",
        "final_norm.scale_linear.1.weight", "noise_head.conv_transpose.weight", "noise_head.conv_transpose.bias"})
    EXPECT_TRUE(names.count(key)) << key;
  EXPECT_EQ(frozen, (std::set<std::string>{
                        "gaussian_diffusion.sqrt_alphas_cum_prod", "gaussian_diffusion.sqrt_one_minus_alphas_cum_prod",
                        "patch_embedding_layer.position_embeddings", "timestep_embedding_layer.timestep_embedding"}));
  // The unconditional label has its own row; an 8th label is out of range.
  EXPECT_EQ(model->named_parameters()["label_embedding_layer.weight"].size(0), 6);
  models::Features bad = batch;
  bad["label"] = torch::full({4}, 6, torch::kLong);
  try {
    model->forward(bad, false);
    ADD_FAILURE() << "an out-of-range label was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("a label outside [0, 6)"), std::string::npos) << e.what();
  }
}

// DiT-XL/2 at 256 px as modelzoo's file sets it up: the paper's 675M
// parameters and 118.6 GFLOPs (multiply-adds) per image. modelzoo's head
// predicts noise only (4 channels, not the paper's 8 with the variance).
TEST(Dit, XlHasThePapersSizeAndCompute) {
  auto spec = dit_spec(
      "{hidden_size: 1152, num_hidden_layers: 28, num_heads: 16, filter_size: 4608, "
      "patch_size: [2, 2], use_conv_patchified_embedding: true, position_embedding_type: fixed, "
      "frequency_embedding_size: 256, num_classes: 1000, label_dropout_rate: 0.1, "
      "vae: {latent_size: [32, 32], latent_channels: 4}}");
  auto model = spec->build(torch::TensorOptions().device(torch::kMeta));
  const int64_t trained = models::trainable_parameter_count(*model);
  EXPECT_NEAR(double(trained), 675e6, 1e6) << trained;
  EXPECT_NEAR(model->forward_flops_per_token() / 2, 118.6e9, 0.3e9);
}

TEST(Dit, ActivationCheckpointingGivesTheSameStep) {
  const std::string yaml =
      "{hidden_size: 16, num_hidden_layers: 2, num_heads: 2, filter_size: 32, patch_size: [2, 2], "
      "latent_size: [4, 4], latent_channels: 2, num_classes: 3, num_diffusion_steps: 100, "
      "frequency_embedding_size: 8, dropout_rate: 0.1, head_initializer: xavier_uniform";
  torch::manual_seed(1);
  auto plain = dit_spec(yaml + "}")->build(torch::TensorOptions());
  torch::manual_seed(1);
  auto recomputed = dit_spec(yaml + ", activation_checkpointing: true}")->build(torch::TensorOptions());
  {
    torch::NoGradGuard no_grad;  // nonzero gates, so the blocks' gradients are not all zero
    for (auto& p : plain->parameters()) p.add_(0.1);
    for (auto& p : recomputed->parameters()) p.add_(0.1);
  }
  const models::Features batch = dit_batch(2, 2, 4, 4, 100, 4, torch::kFloat);
  zoo::testing::expect_same_step(zoo::testing::step_gradients(*plain, batch, 5),
                                 zoo::testing::step_gradients(*recomputed, batch, 5), 1e-6, 1e-4, 1e-6);
}

TEST(Npy, ReadsWhatNumpyWrites) {
  if (!zoo::testing::have_h5py()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-numpy is not installed";
  TempDir dir;
  const auto r =
      zoo::testing::run_command("/usr/bin/python3 -c \"\nimport numpy as np\nd = '" + dir.path() +
                                "'\na = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7\n"
                                "np.save(d + '/f16.npy', np.asfortranarray(a.astype(np.float16)))\n"
                                "a.astype(np.float16).astype(np.float32).tofile(d + '/f16.bin')\n"
                                "np.savez(d + '/plain.npz', x=a, label=np.int64(7), path='some/file')\n"
                                "np.savez_compressed(d + '/small.npz', x=a, flags=np.array([True, False]))\n\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const torch::Tensor expected = torch::arange(24, torch::kFloat).reshape({2, 3, 4}) / 7;

  std::ifstream in(dir / "f16.npy", std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const torch::Tensor f16 = data::parse_npy(bytes, "f16.npy");
  EXPECT_EQ(f16.scalar_type(), torch::kHalf);
  const torch::Tensor written = torch::from_file(dir / "f16.bin", false, 24, torch::kFloat).reshape({2, 3, 4});
  EXPECT_TRUE(torch::equal(f16.to(torch::kFloat), written));  // Fortran order comes back in C order

  auto plain = data::read_npz(dir / "plain.npz", {"x", "label"});
  EXPECT_TRUE(torch::equal(plain.at("x"), expected));
  EXPECT_EQ(plain.at("label").dim(), 0);
  EXPECT_EQ(plain.at("label").item<int64_t>(), 7);
  auto small = data::read_npz(dir / "small.npz", {"x", "flags"});
  EXPECT_TRUE(torch::equal(small.at("x"), expected));
  EXPECT_TRUE(torch::equal(small.at("flags"), torch::tensor({true, false})));
  try {
    data::read_npz(dir / "plain.npz", {"vae_output"});
    ADD_FAILURE() << "a missing array was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find("plain.npz: no array 'vae_output' (the file holds: x.npy, label.npy, path.npy)"),
        std::string::npos)
        << e.what();
  }
}

// modelzoo's latent layout (create_imagenet_latents.py: <split>/<class>/*.npz
// with vae_output = mean and log-variance) through DiffusionLatentImageNet1KProcessor.
TEST(DiffusionData, LatentFilesGiveScaledSamplesWithTheirFolderLabels) {
  if (!zoo::testing::have_h5py()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-numpy is not installed";
  TempDir dir;
  const auto r = zoo::testing::run_command(
      "/usr/bin/python3 -c \"\nimport numpy as np, os\nroot = '" + dir.path() +
      "'\nrng = np.random.default_rng(0)\n"
      "for d, n in (('a', 3), ('b', 1)):\n"
      "  for c, name in enumerate(('n015', 'n002')):\n"
      "    os.makedirs(f'{root}/{d}/train/{name}')\n"
      "    for i in range(n):\n"
      "      mean = rng.standard_normal((2, 4, 4)).astype(np.float32) + (10 if d == 'b' else 0)\n"
      "      logvar = np.full((2, 4, 4), -40.0, np.float32)\n"
      "      save = np.savez if i % 2 == 0 else np.savez_compressed\n"
      "      save(f'{root}/{d}/train/{name}/{i}.npz', vae_output=np.concatenate([mean, logvar]), "
      "label=np.int64(c), dest_path=f'{name}/{i}.npz')\n"
      "os.makedirs(f'{root}/bad/train/x')\n"
      "np.savez(f'{root}/bad/train/x/0.npz', vae_output=np.zeros((2, 4, 4), np.float32))\n\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string section =
      "{data_processor: DiffusionLatentImageNet1KProcessor, batch_size: 6, split: train, "
      "num_classes: 3, num_diffusion_steps: 40, latent_size: [4, 4], latent_channels: 2, "
      "vae_scaling_factor: 0.5, label_dropout_rate: 0.0, shuffle: false, data_dir: ";
  // One directory: sample k is file k in sorted class order (n002 is class 0), scaled, log-variance clamped at -30.
  auto one = zoo::testing::open_loader(section + (dir / "a") + "}");
  const models::Features batch = one->next();
  EXPECT_TRUE(torch::equal(batch.at("label"), torch::tensor({0, 0, 0, 1, 1, 1}, torch::kLong)));
  const auto first = data::read_npz(dir / "a/train/n002/0.npz", {"vae_output"}).at("vae_output");
  EXPECT_TRUE(torch::allclose(batch.at("input")[0], first.narrow(0, 0, 2) * 0.5, 0, 1e-5));
  EXPECT_EQ(batch.at("diffusion_noise").sizes(), torch::IntArrayRef({6, 2, 4, 4}));
  EXPECT_TRUE(((batch.at("timestep") >= 0) & (batch.at("timestep") < 40)).all().item<bool>());
  // The same stream gives the same draws (a resumed run, every eval pass).
  auto again = zoo::testing::open_loader(section + (dir / "a") + "}");
  const models::Features same = again->next();
  for (const char* f : {"input", "diffusion_noise", "timestep", "label"})
    EXPECT_TRUE(torch::equal(batch.at(f), same.at(f))) << f;

  // Two directories: each sample comes from either (b's means are near 10), the epoch is the larger's.
  auto two = zoo::testing::open_loader(section + "[" + (dir / "a") + ", " + (dir / "b") + "]}");
  EXPECT_EQ(two->batches_per_epoch(), 1);
  int from_b = 0, samples = 0;
  for (int i = 0; i < 10; ++i) {
    const torch::Tensor means = two->next().at("input").mean({1, 2, 3});
    from_b += (means > 2.5).sum().item<int>();
    samples += int(means.size(0));
  }
  EXPECT_GT(from_b, samples / 4);
  EXPECT_LT(from_b, 3 * samples / 4);

  std::string one_at_a_time = section;
  one_at_a_time.replace(one_at_a_time.find("batch_size: 6"), 13, "batch_size: 1");
  try {
    zoo::testing::open_loader(one_at_a_time + (dir / "bad") + "}")->next();
    ADD_FAILURE() << "a latent of the wrong shape was read";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("0.npz: vae_output has shape [2, 4, 4], expected (4, 4, 4)"),
              std::string::npos)
        << e.what();
  }
  const std::string few = zoo::testing::open_error(
      "{data_processor: DiffusionLatentImageNet1KProcessor, batch_size: 2, num_classes: 1, latent_size: [4, 4], "
      "latent_channels: 2, data_dir: " +
      (dir / "a") + "}");
  EXPECT_NE(few.find("num_classes: 1 classes, but " + (dir / "a/train") + " holds 2 class folders"), std::string::npos)
      << few;
  std::string val = section;
  val.replace(val.find("split: train"), 12, "split: val");
  const std::string empty = zoo::testing::open_error(val + (dir / "a") + "}");
  EXPECT_NE(empty.find("split: no directory 'val' in " + (dir / "a")), std::string::npos) << empty;
  const std::string images = zoo::testing::open_error("{data_processor: DiffusionImageNet1KProcessor, batch_size: 2}");
  EXPECT_NE(images.find("data_processor: modelzoo's DiffusionImageNet1KProcessor is not one zoo has"),
            std::string::npos)
      << images;
}

TEST(DiffusionData, DrawsFollowTheirRates) {
  auto loader = zoo::testing::open_loader(
      "{data_processor: DiffusionSyntheticDataProcessor, batch_size: 50, num_examples: 400, num_classes: 10, "
      "num_diffusion_steps: 1000, latent_size: [2, 2], latent_channels: 4, label_dropout_rate: 0.3}");
  torch::Tensor labels, steps, noise;
  for (int i = 0; i < 8; ++i) {
    const models::Features b = loader->next();
    labels = labels.defined() ? torch::cat({labels, b.at("label")}) : b.at("label");
    steps = steps.defined() ? torch::cat({steps, b.at("timestep")}) : b.at("timestep");
    noise =
        noise.defined() ? torch::cat({noise, b.at("diffusion_noise").flatten()}) : b.at("diffusion_noise").flatten();
  }
  const double dropped = (labels == 10).to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(dropped, 0.3, 0.06);
  EXPECT_TRUE(((labels >= 0) & (labels <= 10)).all().item<bool>());
  EXPECT_GE(steps.min().item<int64_t>(), 0);
  EXPECT_LT(steps.max().item<int64_t>(), 1000);
  EXPECT_NEAR(steps.to(torch::kDouble).mean().item<double>(), 499.5, 40);
  EXPECT_NEAR(noise.mean().item<double>(), 0.0, 0.05);
  EXPECT_NEAR(noise.std().item<double>(), 1.0, 0.05);
}

// modelzoo 2.1's layout (a description and a tag on top): the model takes
// num_classes and num_diffusion_steps from train_input, the data take the
// latent shape and scaling factor from the model's vae; a value both give must agree.
TEST(DiffusionData, InputKeysComeFromTheModel) {
  const std::string legacy = R"(
description: "DiT-S with patch size 2*2"
tag: "dit_s_2"
train_input:
  data_processor: DiffusionSyntheticDataProcessor
  batch_size: 4
  num_classes: 7
  num_diffusion_steps: 30
  image_channels: 3
  image_size: [32, 32]
model:
  hidden_size: 16
  num_hidden_layers: 1
  num_heads: 2
  filter_size: 32
  patch_size: [2, 2]
  frequency_embedding_size: 8
  label_dropout_rate: 0.25
  encoder_nonlinearity: gelu
  mixed_precision: True
  fp16_type: bfloat16
  vae: {latent_size: [4, 4], latent_channels: 3, scaling_factor: 0.3}
  reverse_process: {sampler: {name: ddpm}, pipeline: {guidance_scale: 1.0}}
optimizer: {optimizer_type: AdamW, learning_rate: 0.0001}
runconfig: {max_steps: 2}
)";
  const Params p = params_from_node(config::load_yaml_string(legacy, "p.yaml"), "p.yaml", YAML::Node());
  EXPECT_EQ(p.model_name, "dit");
  const std::string warnings = [&] {
    std::string all;
    for (const auto& w : p.warnings) all += w + "\n";
    return all;
  }();
  EXPECT_NE(warnings.find("description: ignored"), std::string::npos) << warnings;
  const YAML::Node model = p.model->to_yaml(), input = p.train_input->to_yaml();
  EXPECT_EQ(model["num_classes"].as<int64_t>(), 7);
  EXPECT_EQ(model["num_diffusion_steps"].as<int64_t>(), 30);
  EXPECT_EQ(input["latent_channels"].as<int64_t>(), 3);
  EXPECT_EQ(input["latent_size"][1].as<int64_t>(), 4);
  EXPECT_DOUBLE_EQ(input["vae_scaling_factor"].as<double>(), 0.3);
  EXPECT_DOUBLE_EQ(input["label_dropout_rate"].as<double>(), 0.25);

  // convert-legacy writes it in the Trainer format (without the notes), which resolves to the same params.
  TempDir dir;
  const std::string file = zoo::testing::write_file(dir / "legacy.yaml", legacy), converted = dir / "trainer.yaml";
  const auto r =
      zoo::testing::run_command(zoo::testing::zoo_binary() + " config convert-legacy " + file + " " + converted);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  YAML::Emitter a, b;
  a << load_params(file, YAML::Node()).resolved();
  b << load_params(converted, YAML::Node()).resolved();
  EXPECT_EQ(std::string(a.c_str()), b.c_str());

  std::string conflicting = legacy;
  conflicting.replace(conflicting.find("  image_channels"), 0, "  label_dropout_rate: 0.1\n");
  const std::string error = zoo::testing::params_error(conflicting);
  EXPECT_NE(error.find("p.yaml:" + zoo::testing::line_of(conflicting, "label_dropout_rate: 0.1")), std::string::npos)
      << error;
  EXPECT_NE(error.find("train_input.label_dropout_rate: is 0.1 but the model's label_dropout_rate is 0.25; "
                       "they must agree"),
            std::string::npos)
      << error;
}

TEST(Dit, TrainsAndResumesExactlyFromAModelzooStyleTrainerConfig) {
  TempDir dir;
  const std::string params = zoo::testing::write_file(dir / "dit.yaml", R"(
trainer:
  init:
    seed: 1
    backend:
      backend_type: CPU
    model:
      name: dit
      schedule_name: linear
      embedding_dropout_rate: 0.0
      hidden_size: 32
      embedding_nonlinearity: silu
      position_embedding_type: fixed
      frequency_embedding_size: 32
      label_dropout_rate: 0.1
      num_hidden_layers: 2
      layer_norm_epsilon: 1.0e-06
      num_heads: 4
      attention_type: scaled_dot_product
      attention_softmax_fp32: true
      dropout_rate: 0.0
      encoder_nonlinearity: gelu
      attention_dropout_rate: 0.0
      use_projection_bias_in_attention: true
      use_ffn_bias_in_attention: true
      filter_size: 64
      use_ffn_bias: true
      initializer_range: 0.02
      norm_first: true
      patch_size: [2, 2]
      use_conv_patchified_embedding: true
      num_diffusion_steps: 100
      num_classes: 4
      vae:
        down_block_types: [DownEncoderBlock2D]
        up_block_types: [UpDecoderBlock2D]
        block_out_channels: [128]
        layers_per_block: 2
        act_fn: silu
        latent_size: [8, 8]
        latent_channels: 4
        norm_num_groups: 32
        sample_size: 64
        scaling_factor: 0.18215
        in_channels: 3
        out_channels: 3
      reverse_process:
        sampler: {name: ddpm, beta_start: 0.0001, beta_end: 0.02, num_inference_steps: 250}
        pipeline: {guidance_scale: 1.0, num_cfg_channels: 3, num_classes: 4, custom_labels: None}
    optimizer:
      AdamW:
        learning_rate: 0.001
        weight_decay: 0.0
    loop:
      max_steps: 40
      eval_frequency: 40
    checkpoint:
      steps: 20
      save_initial_checkpoint: true
    logging:
      log_steps: 5
    callbacks:
    - ComputeNorm: {}
    schedulers:
    - ConstantLR:
        learning_rate: 0.001
  fit:
    train_dataloader:
      data_processor: DiffusionSyntheticDataProcessor
      batch_size: 16
      shuffle: true
      shuffle_seed: 3
      num_classes: 4
      num_workers: 1
      split: train
      num_diffusion_steps: 100
      image_channels: 3
    val_dataloader:
      data_processor: DiffusionSyntheticDataProcessor
      batch_size: 16
      num_examples: 64
      shuffle: false
      num_classes: 4
      split: val
      num_diffusion_steps: 100
      image_channels: 3
)");
  const auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                           " --mode train_and_eval --model_dir " + (dir / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("reverse_process: ignored"), std::string::npos) << r.output;
  const std::vector<double> whole = zoo::testing::train_losses(r.output);
  ASSERT_EQ(whole.size(), 8u) << r.output;
  // Synthetic latents are pure noise: the best prediction of the noise is a
  // fixed share of the noised latent, which the model learns from loss ~1.
  EXPECT_NEAR(whole.front(), 1.0, 0.2) << r.output;
  EXPECT_LT(whole.back(), 0.7 * whole.front()) << r.output;
  EXPECT_NE(r.output.find("Avg Eval Loss: "), std::string::npos) << r.output;

  const auto state = ckpt::model_weights(ckpt::load_checkpoint_file(dir / "run/checkpoint_40.mdl"), "ckpt");
  for (const char* key : {"model.transformer_decoder.layers.1.gate_mlp.1.weight",
                          "model.gaussian_diffusion.sqrt_alphas_cum_prod", "model.noise_head.conv_transpose.weight"})
    EXPECT_TRUE(state.contains(key)) << key;

  const std::string train =
      zoo::testing::zoo_binary() + " CPU --params " + params + " --mode train --model_dir " + (dir / "resumed");
  const auto first = zoo::testing::run_command(train + " --max_steps 20");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto rest = zoo::testing::run_command(train + " --max_steps 40");
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  std::vector<double> resumed = zoo::testing::train_losses(first.output);
  for (double l : zoo::testing::train_losses(rest.output)) resumed.push_back(l);
  EXPECT_EQ(resumed, whole) << first.output << rest.output;
}
