// multimodal_simple (models/multimodal_simple) and
// MultimodalSimpleHDF5MapDataProcessor (data/llava_hdf5): the logits and
// loss against a float64 forward written in Python from modelzoo's layers
// (every image of a sample through each ViT tower, features at a layer or
// after the final norm, per-tower and global projections, the features
// scattered into the text embeddings at image_data_loc with unused slots
// dropped through a spare position, a LLaMA decoder honouring
// key_padding_mask), modelzoo's keys and freezing, the sizes of modelzoo's
// LLaVA-7B layout, the errors for towers that cannot join, the processor's
// files as h5py writes them, modelzoo 2.3's layout, and a Trainer-format run
// laid out as modelzoo's phase-2 file that trains only what it does not freeze.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "data/image.h"
#include "models/multimodal_simple/multimodal_simple.h"
#include "multimodal_reference.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

std::shared_ptr<const models::ModelSpec> mm_spec(const std::string& yaml) {
  return models::find_model("multimodal_simple").parse(YAML::Load(yaml), config::Context{"m.yaml", "model"});
}

// A LLaMA-style decoder, small (the reference's).
const char* const kTextModel = zoo::testing::kReferenceTextModel;

// A CLIP-style ViT on 8 x 8 images in 4 x 4 patches (4 patches and [CLS]), 3 layers.
std::string encoder(int64_t hidden, bool conv, const std::string& layer) {
  return "{name: ViTModel, hidden_size: " + std::to_string(hidden) +
         ", num_hidden_layers: 3, num_heads: 2, filter_size: 16, image_size: [8, 8], patch_size: [4, 4], "
         "num_channels: 3, use_conv_patchified_embedding: " +
         (conv ? "true" : "false") +
         ", use_post_embed_layer_norm: true, use_embed_proj_bias: false, nonlinearity: quick_gelu, "
         "prepend_cls_token: true, dropout_rate: 0.0, attention_dropout_rate: 0.0, norm_first: true" +
         (layer.empty() ? "" : ", image_layer_idx: " + layer) + "}";
}

// modelzoo's LLaVA-1.5 layout: one tower's second-to-last layer, a global 2-layer gelu projection.
std::string llava_layout(const std::string& extra = "") {
  return "{image_model_list: {image_feature_select_mode: patch, image_models: [{image_encoder: " +
         encoder(8, true, "-2") +
         "}], global_image_projection: {name: FeedForwardNetwork, input_unit: 8, layers_units: [12, 12], "
         "layers_activation: [gelu, null], use_bias: true}}, " +
         kTextModel + extra + "}";
}

// modelzoo's MMSimpleModel in float64, from its layers
// (tests/multimodal_reference.h): per tower the ViT up to image_layer_idx (no
// final norm; without it every layer and the final norm), [CLS] dropped in
// patch mode, the tower's projection; the towers joined along the patches,
// the global projection, compute_embeddings' scatter into the text
// embeddings with a zero column at T for unused slots; then the decoder
// honouring key_padding_mask.
const std::string kReference = zoo::testing::oracle("multimodal_simple_reference.py");

// Positions `first` .. first + count - 1 of a (count) row of image_data_loc.
torch::Tensor span(int64_t first, int64_t count) { return torch::arange(first, first + count, torch::kLong); }

models::Features text_batch(int64_t B, int64_t T) {
  models::Features b = {{"text_input_ids", torch::randint(37, {B, T}, torch::kLong)},
                        {"labels", torch::randint(37, {B, T}, torch::kLong)},
                        {"loss_mask", torch::ones({B, T}, torch::kLong)},
                        {"key_padding_mask", torch::zeros({B, T}, torch::kLong)}};
  b["loss_mask"].narrow(1, T - 2, 2).zero_();  // trailing padding, as the preprocessing writes it
  b["key_padding_mask"].narrow(1, T - 2, 2).fill_(1);
  return b;
}

}  // namespace

TEST(MultimodalSimple, LogitsMatchAFloat64ForwardOfModelzoosLayers) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  const int64_t T = 14;
  struct Case {
    std::string yaml, json;
    int64_t slots, per_image;
    std::vector<std::vector<torch::Tensor>> locations;  // per sample, per slot
  };
  const torch::Tensor unused4 = torch::full({4}, T, torch::kLong), unused10 = torch::full({10}, T, torch::kLong);
  const std::vector<Case> cases = {
      // LLaVA-1.5's layout with two image slots: sample 0 fills both, sample 1 leaves its second unused.
      {llava_layout(),
       R"({"towers": [{"hidden": 8, "conv": true, "layer": 1, "proj": false}], "global": true, "mode": "patch", "rotary_dim": 4})",
       2,
       4,
       {{span(1, 4), span(7, 4)}, {span(2, 4), unused4}}},
      // Two towers joined along the patches, [CLS] kept: one after every layer
      // and its final norm with its own projection, one at its first layer;
      // sample 1 is text only.
      {"{image_model_list: {image_feature_select_mode: cls_patch, image_models: [{image_encoder: " +
           encoder(8, true, "") +
           ", projection_layer: {name: FeedForwardNetwork, input_unit: 8, layers_units: [12], layers_activation: "
           "[relu], "
           "use_bias: true}}, {image_encoder: " +
           encoder(12, false, "0") + "}]}, " + kTextModel + "}",
       R"({"towers": [{"hidden": 8, "conv": true, "layer": null, "proj": true}, {"hidden": 12, "conv": false, "layer": 0, "proj": false}], "global": false, "mode": "cls_patch", "rotary_dim": 4})",
       1,
       10,
       {{span(3, 10)}, {unused10}}},
  };
  TempDir dir;
  for (const auto& c : cases) {
    torch::manual_seed(5);
    auto built = mm_spec(c.yaml)->build(torch::TensorOptions().dtype(torch::kDouble));
    auto& model = dynamic_cast<models::MultimodalSimpleModel&>(*built);
    model.eval();
    {
      torch::NoGradGuard no_grad;  // away from initial values (zero biases, unit norms)
      for (auto& p : model.parameters()) p.add_(torch::randn_like(p) * 0.1);
    }
    EXPECT_EQ(model.image_model->features_per_image(), c.per_image);
    models::Features batch = text_batch(2, T);
    batch["image_data"] = torch::randn({2, c.slots, 3, 8, 8}, torch::kDouble);
    std::vector<torch::Tensor> rows;
    for (const auto& sample : c.locations) rows.push_back(torch::stack(sample));
    batch["image_data_loc"] = torch::stack(rows);
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    d.insert("state", ckpt::model_state_dict(model));
    for (const char* f : {"image_data", "image_data_loc", "text_input_ids", "key_padding_mask", "labels", "loss_mask"})
      d.insert(f, batch[f]);
    d.insert("logits", model.padded_logits(batch).detach());
    d.insert("loss", model.forward(batch, false).loss.detach());
    const std::string file = dir / "case.pt";
    ckpt::save_checkpoint_file(file, d);
    const std::string script =
        zoo::testing::write_file(dir / "ref.py", std::string(zoo::testing::kMultimodalReferenceLayers) + kReference);
    const auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + file + " '" + c.json + "'");
    EXPECT_EQ(r.exit_code, 0) << c.yaml << "\n" << r.output;
  }
}

// An unused image slot (its locations at T) changes nothing, whatever its
// image holds; a used one lands where image_data_loc says.
TEST(MultimodalSimple, UnusedSlotsReachNothingAndUsedOnesLandAtTheirLocations) {
  torch::manual_seed(3);
  auto model = mm_spec(llava_layout())->build(torch::TensorOptions());
  auto& mm = dynamic_cast<models::MultimodalSimpleModel&>(*model);
  mm.eval();
  const int64_t T = 12;
  models::Features a = text_batch(1, T);
  a["image_data"] = torch::randn({1, 2, 3, 8, 8});
  a["image_data_loc"] = torch::stack({span(2, 4), torch::full({4}, T, torch::kLong)}).unsqueeze(0);
  models::Features b = a;
  b["image_data"] = a["image_data"].clone();
  b["image_data"][0][1] = torch::randn({3, 8, 8});
  torch::NoGradGuard no_grad;
  const torch::Tensor text = mm.text_model->embed(a["text_input_ids"]);
  const torch::Tensor h = mm.input_embeddings(a["image_data"], a["image_data_loc"], a["text_input_ids"]);
  EXPECT_TRUE(torch::equal(h.narrow(1, 0, 2), text.narrow(1, 0, 2)));
  EXPECT_TRUE(torch::equal(h.narrow(1, 6, T - 6), text.narrow(1, 6, T - 6)));
  EXPECT_FALSE(torch::allclose(h.narrow(1, 2, 4), text.narrow(1, 2, 4)));
  EXPECT_TRUE(torch::equal(mm.padded_logits(a), mm.padded_logits(b)));
  // The first slot's image reaches the text after it.
  b["image_data"][0][0] = torch::randn({3, 8, 8});
  EXPECT_FALSE(torch::allclose(mm.padded_logits(a).narrow(1, 6, 4), mm.padded_logits(b).narrow(1, 6, 4), 1e-5, 1e-5));
  // Images of another size than the towers take are an error naming both.
  try {
    mm.padded_logits({{"image_data", torch::randn({1, 2, 3, 8, 6})},
                      {"image_data_loc", a["image_data_loc"]},
                      {"text_input_ids", a["text_input_ids"]}});
    ADD_FAILURE() << "8 x 6 images were taken by towers of 8 x 8";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(
        std::string(e.what()).find("image_data is [1, 2, 3, 8, 6], expected (batch, images per sample, [3, 8, 8])"),
        std::string::npos)
        << e.what();
  }
  // Locations that do not match the towers' features are an error naming both counts.
  a["image_data_loc"] = a["image_data_loc"].narrow(2, 0, 3);
  try {
    mm.padded_logits(a);
    ADD_FAILURE() << "3 locations per image were taken for 4 features";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(
        std::string(e.what()).find("image_data_loc gives 6 positions per sample, but its 2 image(s) give 8 features"),
        std::string::npos)
        << e.what();
  }
}

TEST(MultimodalSimple, KeepsModelzoosKeysFreezesByRegexAndInitializesProjectionsAsFeedForwardNetwork) {
  auto model =
      mm_spec("{image_model_list: {image_models: [{image_encoder: " + encoder(8, true, "-2") +
              ", projection_layer: {name: FeedForwardNetwork, input_unit: 8, layers_units: [10], use_bias: true}}], "
              "global_image_projection: {name: FeedForwardNetwork, input_unit: 10, layers_units: [12], "
              "use_bias: true}}, " +
              kTextModel + ", freeze: ['^image_model.image_model_list', '^text_model']}")
          ->build(torch::TensorOptions());
  std::set<std::string> trained, names;
  for (const auto& p : model->named_parameters()) {
    names.insert(p.key());
    if (p.value().requires_grad()) trained.insert(p.key());
  }
  EXPECT_EQ(trained, (std::set<std::string>{"image_model.projection.ffn.0.linear_layer.weight",
                                            "image_model.projection.ffn.0.linear_layer.bias"}));
  for (const char* key :
       {"image_model.image_model_list.0.0.embedding_layer.linear_proj.weight",
        "image_model.image_model_list.0.0.embedding_layer.cls_embedding",
        "image_model.image_model_list.0.0.encoder.transformer_encoder.layers.2.self_attn.proj_q_dense_layer.weight",
        "image_model.image_model_list.0.0.encoder.transformer_encoder.norm.weight",
        "image_model.image_model_list.0.1.ffn.0.linear_layer.weight",
        "text_model.embedding_layer.word_embeddings.weight", "text_model.lm_head.weight"})
    EXPECT_TRUE(names.count(key)) << key;
  // FeedForwardNetwork's defaults: xavier_uniform weights (within sqrt(6 / (fan_in + fan_out))), zero biases.
  const torch::Tensor w = model->named_parameters()["image_model.projection.ffn.0.linear_layer.weight"];
  const double bound = std::sqrt(6.0 / (10 + 12));
  EXPECT_LE(w.abs().max().item<double>(), bound);
  EXPECT_GT(w.abs().max().item<double>(), 0.8 * bound);
  EXPECT_EQ(model->named_parameters()["image_model.projection.ffn.0.linear_layer.bias"].abs().max().item<double>(),
            0.0);
}

TEST(MultimodalSimple, TowersThatCannotJoinAreErrorsNamingTheKey) {
  auto expect_error = [](const std::string& yaml, const std::string& key, const std::string& what) {
    zoo::testing::expect_model_error("multimodal_simple", yaml, key, what);
  };
  const std::string text = std::string(", ") + kTextModel + "}";
  expect_error("{image_model_list: {image_models: [{image_encoder: " + encoder(8, true, "") + "}]}" + text,
               "model.image_model_list", "the image features are 8 wide and the decoder's input 12");
  expect_error("{image_model_list: {image_models: [{image_encoder: " + encoder(12, true, "") +
                   "}, {image_encoder: " + encoder(8, true, "") + "}]}" + text,
               "model.image_model_list.image_models[1]", "its features are 8 wide and image_models[0]'s 12");
  expect_error("{image_model_list: {image_models: [{image_encoder: " + encoder(8, true, "") +
                   "}], global_image_projection: {input_unit: 6, layers_units: [12]}}" + text,
               "model.image_model_list.global_image_projection", "input_unit is 6 but the towers' features are 8 wide");
  expect_error("{image_model_list: {image_models: [{image_encoder: " + encoder(12, true, "3") + "}]}" + text,
               "model.image_model_list.image_models[0].image_encoder.image_layer_idx", "-3 .. 2");
  expect_error(
      "{image_model_list: {image_models: [{image_encoder: " + encoder(12, true, "") + ", projector: {}}]}" + text,
      "image_models[0].projector", "unknown key");
  expect_error("{image_model_list: {image_models: []}" + text, "model.image_model_list.image_models",
               "a list of image towers");
  expect_error("{image_model_list: {image_models: [{image_encoder: " + encoder(12, true, "") +
                   "}]}, text_model: {name: T5ForConditionalGeneration, src_vocab_size: 37}}",
               "model.text_model.name", "a decoder of the gpt2 family");
  std::string larger = encoder(12, true, "");
  larger.replace(larger.find("image_size: [8, 8]"), 18, "image_size: [16, 16]");
  expect_error("{image_model_list: {image_models: [{image_encoder: " + encoder(12, true, "") +
                   "}, {image_encoder: " + larger + "}]}" + text,
               "model.image_model_list.image_models[1]",
               "its encoder takes images of 3 x [16, 16] and image_models[0]'s 3 x [8, 8]");
  std::string dual = llava_layout();
  dual.replace(dual.find("static_dual_expert: false"), 25, "static_dual_expert: true");
  expect_error(dual, "model.text_model.extra_ffn_params.static_dual_expert", "dual-expert FFN");
}

// modelzoo's LLaVA-7B phase files in multimodal_simple's layout: CLIP
// ViT-L/14-336 and Vicuna-7B with the 2-layer global projection, as
// modelzoo's llava's (7,062,902,784 parameters); 576 features per image.
TEST(MultimodalSimple, SevenBHasTheSizesOfItsTowers) {
  auto spec = mm_spec(
      "{image_model_list: {image_feature_select_mode: patch, image_models: [{image_encoder: {name: ViTModel, "
      "hidden_size: 1024, num_hidden_layers: 24, num_heads: 16, filter_size: 4096, image_size: [336, 336], "
      "patch_size: [14, 14], use_conv_patchified_embedding: true, use_post_embed_layer_norm: true, "
      "use_embed_proj_bias: false, nonlinearity: quick_gelu, prepend_cls_token: true, image_layer_idx: -2}}], "
      "global_image_projection: {name: FeedForwardNetwork, input_unit: 1024, layers_units: [4096, 4096], "
      "layers_activation: [gelu, null], use_bias: true}}, "
      "text_model: {name: LlamaModel, vocab_size: 32000, hidden_size: 4096, num_hidden_layers: 32, num_heads: 32, "
      "filter_size: 11008, max_position_embeddings: 2048, position_embedding_type: rotary, rotary_dim: 128, "
      "norm_type: rmsnorm, nonlinearity: swiglu, use_projection_bias_in_attention: false, "
      "use_ffn_bias_in_attention: false, use_ffn_bias: false, use_bias_in_output: false, share_embedding_weights: "
      "false}}");
  auto model = spec->build(torch::TensorOptions().device(torch::kMeta));
  auto& mm = dynamic_cast<models::MultimodalSimpleModel&>(*model);
  EXPECT_EQ(mm.image_model->features_per_image(), 576);
  EXPECT_EQ(models::parameter_count(mm), 7062902784);
  EXPECT_EQ(models::parameter_count(*mm.text_model), 6738415616);  // Llama-2-7B
  EXPECT_EQ(models::parameter_count(*mm.image_model->projection), 1024 * 4096 + 4096 + 4096 * 4096 + 4096);
}

namespace {

// multimodal_simple samples as modelzoo's data_preprocessing (is_multimodal)
// and h5py write them, two image slots of 4 features each: a.h5 with
// fixed-length img_path strings (dtype "S", shape (n, 2)), b.h5 with
// variable-length ones; wide.png (6 x 10), square.png (8 x 8). Sample k of
// a.h5 puts its first image at 1..4 and, when it has a second, at 6..9;
// unused slots are "None" at position T. Rows: ids, loss mask, labels, key
// padding, token_modality_idx. `labels`: a Python expression of the (k, T) labels.
std::string write_samples(const TempDir& dir, int64_t T, int64_t samples_a = 3, const std::string& change = "",
                          const std::string& labels = "rng.integers(0, 37, (k, T))") {
  std::filesystem::create_directories(dir / "h5");
  zoo::testing::write_test_images(dir);
  const auto r = zoo::testing::run_command(
      "/usr/bin/python3 " + zoo::testing::source_dir() + "/tests/oracles/multimodal_simple_write_samples.py " +
      zoo::testing::shell_quoted(dir / "h5") + " " + std::to_string(T) + " " + std::to_string(samples_a) + " " +
      zoo::testing::shell_quoted(change) + " " + zoo::testing::shell_quoted(labels));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return "{data_processor: MultimodalSimpleHDF5MapDataProcessor, data_dir: " + (dir / "h5") +
         ", img_data_dir: " + (dir / "images") + ", shuffle: false, batch_size: 5, max_num_img: 2, ";
}

const char* const kImageTail =
    "image_data_size: [3, 8, 8], transforms: [{name: expand_to_square, background_color: "
    "[122, 116, 104]}, {name: resize, size: 8, interpolation: bicubic}, {name: to_tensor}]}";

}  // namespace

TEST(MultimodalSimpleData, ReadsModelzoosFilesWithSeveralImagesPerSample) {
  if (!zoo::testing::have_h5py()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-h5py is not installed";
  TempDir dir;
  const std::string section = write_samples(dir, 12);
  const models::Features b = zoo::testing::open_loader(section + "num_patches: 4, " + kImageTail)->next();
  for (const char* f : {"text_input_ids", "loss_mask", "labels", "key_padding_mask", "token_modality_idx"})
    EXPECT_EQ(b.at(f).sizes(), torch::IntArrayRef({5, 12})) << f;
  ASSERT_EQ(b.at("image_data").sizes(), torch::IntArrayRef({5, 2, 3, 8, 8}));
  ASSERT_EQ(b.at("image_data_loc").sizes(), torch::IntArrayRef({5, 2, 4}));
  // Sample 0: both slots used; sample 1 leaves its second to a black stand-in at position T.
  EXPECT_TRUE(torch::equal(b.at("image_data_loc")[0][1], torch::arange(6, 10)));
  EXPECT_TRUE(torch::equal(b.at("image_data_loc")[1][1], torch::full({4}, 12, torch::kLong)));
  EXPECT_EQ(b.at("image_data")[1][1].abs().max().item<float>(), 0.0f);
  EXPECT_EQ(b.at("token_modality_idx")[0].sum().item<int64_t>(), 8);
  EXPECT_EQ(b.at("token_modality_idx")[1].sum().item<int64_t>(), 4);
  // The same image in two slots and two files (fixed and variable-length paths) reads the same.
  EXPECT_GT(b.at("image_data")[1][0].abs().max().item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(b.at("image_data")[0][1], b.at("image_data")[1][0]));
  EXPECT_TRUE(torch::equal(b.at("image_data")[3][0], b.at("image_data")[1][0]));
  EXPECT_TRUE(torch::equal(b.at("image_data")[3][1], b.at("image_data")[0][0]));
  EXPECT_FALSE(torch::equal(b.at("image_data")[0][0], b.at("image_data")[0][1]));

  std::string three = section;
  three.replace(three.find("max_num_img: 2"), 14, "max_num_img: 3");
  const std::string slots = zoo::testing::open_error(three + kImageTail);
  EXPECT_NE(slots.find("a.h5: dataset 'img_path' holds 6 strings for 3 samples; expected 3 image paths (or \"None\") "
                       "per sample (max_num_img: 3)"),
            std::string::npos)
      << slots;
  const std::string patches = zoo::testing::open_error(section + "num_patches: 5, " + kImageTail);
  EXPECT_NE(patches.find("a.h5: dataset 'img_data_loc' is (3, 2, 4), expected (3, 2 (max_num_img), 5 (num_patches))"),
            std::string::npos)
      << patches;
}

TEST(MultimodalSimpleData, BadFilesAreNamed) {
  if (!zoo::testing::have_h5py()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-h5py is not installed";
  {
    TempDir dir;
    const std::string e = zoo::testing::first_batch_error(write_samples(dir, 12, 3, "data[1, 4, 3] = 2") + kImageTail);
    EXPECT_NE(e.find("a.h5, sample 1, position 3: token_modality_idx is 2, expected 0 or 1"), std::string::npos) << e;
  }
  {
    TempDir dir;
    const std::string e = zoo::testing::first_batch_error(write_samples(dir, 12, 3, "loc[2, 0, 1] = 13") + kImageTail);
    EXPECT_NE(
        e.find("a.h5, sample 2: img_data_loc of image 0 holds position 13, expected 0 .. 11 (or 12: an unused slot)"),
        std::string::npos)
        << e;
  }
  {
    TempDir dir;
    std::string section = write_samples(dir, 12);
    section.replace(section.find("max_num_img: 2, "), 16, "");
    const std::string e = zoo::testing::open_error(section + kImageTail);
    EXPECT_NE(
        e.find("holds 6 strings for 3 samples; expected one image path (or \"None\") per sample (max_num_img: 1)"),
        std::string::npos)
        << e;
    EXPECT_NE(e.find("a.h5"), std::string::npos) << e;
  }
}

// A Trainer-format file laid out as modelzoo's multimodal_simple phase 2
// (the image towers frozen; the projection and the decoder trained) on the
// files above, two image slots per sample, shuffled and randomly flipped:
// the loss falls, the towers' weights stay as they were, the rest move, and
// a stopped run resumes exactly.
TEST(MultimodalSimple, TrainsOnlyWhatItDoesNotFreezeFromAModelzooStyleConfig) {
  if (!zoo::testing::have_h5py()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-h5py is not installed";
  TempDir dir;
  std::string section = write_samples(dir, 12, 6, "", "np.full((k, T), 7)");  // every counted label is 7
  section.replace(section.find("batch_size: 5"), 13, "batch_size: 4");
  section.replace(section.find("shuffle: false"), 14, "shuffle: true");  // and random flips: drawn again on resume
  const std::string flipped =
      "image_data_size: [3, 8, 8], transforms: [{name: expand_to_square, background_color: "
      "[122, 116, 104]}, {name: resize, size: 8}, {name: random_horizontal_flip}, "
      "{name: to_tensor}]}";
  zoo::testing::expect_trains_all_but_frozen(dir, R"(      name: multimodal_simple
      image_model_list:
        image_feature_select_mode: patch
        image_models:
        - image_encoder: )" + encoder(8, true, "-2") + R"(
        global_image_projection: {name: FeedForwardNetwork, input_unit: 8, layers_units: [12, 12], layers_activation: [gelu, null], use_bias: true}
      )" + kTextModel + R"(
      freeze: ['^image_model.image_model_list']
      loss_scaling: num_tokens
      loss_weight: 1.0)",
                                             section + flipped, "model.image_model.image_model_list.");
}

// modelzoo 2.3's layout: no model name (image_model_list makes it
// multimodal_simple), each tower a list [encoder, projection].
TEST(MultimodalSimple, Modelzoo23FilesAreReadWithTheirTowerLists) {
  const std::string legacy =
      "train_input: {data_processor: MultimodalSimpleHDF5MapDataProcessor, data_dir: ./h5, img_data_dir: ./images, "
      "image_data_size: [3, 8, 8], transforms: [{name: to_tensor}], batch_size: 2, bos_token_id: 1, pad_token_id: 0, "
      "mixed_precision: true}\n"
      "model: {image_model_list: {image_feature_select_mode: patch, image_models: [{image_model: [" +
      encoder(8, true, "-2") +
      ", {name: FeedForwardNetwork, input_unit: 8, layers_units: [12], layers_activation: [gelu]}]}]}, " + kTextModel +
      ", freeze: ['^image_model.image_model_list', '^text_model'], loss_scaling: num_tokens, loss_weight: 1.0, "
      "mixed_precision: true, fp16_type: cbfloat16}\n"
      "optimizer: {optimizer_type: AdamW, learning_rate: 0.001}\nrunconfig: {max_steps: 2}\n";
  const Params p = params_from_node(config::load_yaml_string(legacy, "p.yaml"), "p.yaml", YAML::Node());
  EXPECT_EQ(p.model_name, "multimodal_simple");
  const YAML::Node resolved = p.model->to_yaml();
  const YAML::Node tower = resolved["image_model_list"]["image_models"][0];
  EXPECT_EQ(tower["image_encoder"]["image_layer_idx"].as<int64_t>(), 1);
  EXPECT_EQ(tower["projection_layer"]["layers_units"][0].as<int64_t>(), 12);
  EXPECT_EQ(resolved["text_model"]["name"].as<std::string>(), "LlamaModel");
  // The resolved section (written to params_train.yaml) reads back to the same model.
  EXPECT_EQ(YAML::Dump(mm_spec(YAML::Dump(resolved))->to_yaml()), YAML::Dump(resolved));
  auto model = p.model->build(torch::TensorOptions().device(torch::kMeta));
  EXPECT_TRUE(model->named_parameters().contains("image_model.image_model_list.0.1.ffn.0.linear_layer.weight"));
}
