// Implementation of models/multimodal_simple/multimodal_simple.h.
#include "models/multimodal_simple/multimodal_simple.h"

#include "models/common/freeze.h"
#include "models/common/lm_loss.h"
#include "models/common/multimodal_towers.h"
#include "models/llava/hf_adapter.h"

namespace zoo::models {

const config::Schema<MultimodalSimpleOptions>& MultimodalSimpleOptions::schema() {
  using O = MultimodalSimpleOptions;
  static const config::Schema<O> s =
      config::Schema<O>("model (multimodal_simple)",
                        "modelzoo's multimodal_simple: `image_model_list` (image towers, each a ViTModel with an "
                        "optional projection, and a global projection) and `text_model` (a decoder's model section, "
                        "with its name, e.g. LlamaModel).")
          .field("freeze", &O::freeze,
                 "Regexes: parameters of the modules whose names match (e.g. ^image_model.image_model_list, "
                 "^text_model) do not train.")
          .field("loss_scaling", &O::loss_scaling,
                 "num_tokens: loss sum / counted tokens; batch_size: / B * loss_weight.",
                 config::one_of({"num_tokens", "batch_size"}))
          .field("loss_weight", &O::loss_weight, "Factor with loss_scaling batch_size (modelzoo's default: 0).")
          .field("output_list", &O::output_list,
                 "modelzoo's intermediate outputs (image, image_encoder_out, projector_out): they change nothing "
                 "zoo trains or reports.")
          .validate([](const O& o, const auto& fail) {
            if (o.freeze)
              if (const std::string bad = check_freeze_patterns(*o.freeze); !bad.empty()) fail("freeze", bad);
            if (o.output_list)
              for (const auto& out : *o.output_list)
                if (out != "image" && out != "image_encoder_out" && out != "projector_out")
                  fail("output_list", "'" + out + "': expected image, image_encoder_out or projector_out");
          });
  return s;
}

const config::Schema<ImageModelListOptions>& ImageModelListOptions::schema() {
  using O = ImageModelListOptions;
  static const config::Schema<O> s =
      config::Schema<O>("model.image_model_list", "The image towers (image_models) and what joins them.")
          .field("image_feature_select_mode", &O::image_feature_select_mode,
                 "patch: the patches' features only; cls_patch: [CLS]'s too.", config::one_of({"patch", "cls_patch"}))
          .field("global_image_projection", &O::global_image_projection,
                 "A FeedForwardNetwork over every tower's features joined (null: none).");
  return s;
}

int64_t ImageTowerSpec::features(bool patch_mode) const { return tower_features(encoder, patch_mode); }

int64_t features_per_image(const std::vector<ImageTowerSpec>& towers, bool patch_mode) {
  int64_t n = 0;
  for (const auto& t : towers) n += t.features(patch_mode);
  return n;
}

MultimodalImageEncodersImpl::MultimodalImageEncodersImpl(const std::vector<ImageTowerSpec>& towers,
                                                         const ImageModelListOptions& o, const torch::TensorOptions& p)
    : towers_(towers), options_(o) {
  image_model_list = register_module("image_model_list", torch::nn::ModuleList());
  for (const ImageTowerSpec& t : towers_) {
    torch::nn::ModuleList pair;
    encoders_.push_back(VitEncoder(t.encoder, p));
    pair->push_back(encoders_.back());
    projections_.push_back(t.projection ? Projector(*t.projection, p) : Projector(nullptr));
    if (projections_.back()) pair->push_back(projections_.back());
    else pair->push_back(torch::nn::Identity());  // modelzoo's nn.Identity: no parameters, index 1 kept
    image_model_list->push_back(pair);
  }
  if (o.global_image_projection) projection = register_module("projection", Projector(*o.global_image_projection, p));
}

void MultimodalImageEncodersImpl::reset_parameters() {
  for (size_t i = 0; i < encoders_.size(); ++i) {
    encoders_[i]->reset_parameters();
    if (projections_[i]) projections_[i]->reset_parameters();
  }
  if (projection) projection->reset_parameters();
}

int64_t MultimodalImageEncodersImpl::features_per_image() const {
  return models::features_per_image(towers_, options_.image_feature_select_mode == "patch");
}

torch::Tensor MultimodalImageEncodersImpl::forward(const torch::Tensor& images) {
  const VitOptions& first = towers_.front().encoder;
  const std::vector<int64_t> want = {first.num_channels, first.image_size[0], first.image_size[1]};
  if (images.dim() != 5 || images.sizes().slice(2).vec() != want)
    throw std::invalid_argument("multimodal_simple: image_data is " + c10::str(images.sizes()) +
                                ", expected (batch, images per sample, " + c10::str(c10::IntArrayRef(want)) +
                                ") as the image towers' num_channels and image_size (the data's image_data_size)");
  const int64_t B = images.size(0), I = images.size(1);
  const torch::Tensor flat = images.flatten(0, 1);  // (B * I, C, H, W)
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < encoders_.size(); ++i) {
    torch::Tensor f = towers_[i].layer ? encoders_[i]->features(flat, *towers_[i].layer) : encoders_[i]->forward(flat);
    if (options_.image_feature_select_mode == "patch") f = f.narrow(1, 1, f.size(1) - 1);
    if (projections_[i]) f = projections_[i]->forward(f);
    out.push_back(f);
  }
  torch::Tensor features = out.size() == 1 ? out.front() : torch::cat(out, 1);
  if (projection) features = projection->forward(features);
  return features.reshape({B, I * features.size(1), features.size(2)});
}

double MultimodalImageEncodersImpl::flops_per_image() const {
  double flops = 0;
  const bool patch = options_.image_feature_select_mode == "patch";
  for (size_t i = 0; i < towers_.size(); ++i) {
    VitOptions used = towers_[i].encoder;
    if (towers_[i].layer) used.num_hidden_layers = *towers_[i].layer + 1;  // the layers after it never run
    flops += vit_encoder_flops(used);
    if (projections_[i]) flops += projections_[i]->flops_per_vector() * double(towers_[i].features(patch));
  }
  if (projection) flops += projection->flops_per_vector() * double(features_per_image());
  return flops;
}

MultimodalSimpleModel::MultimodalSimpleModel(const MultimodalSimpleOptions& o,
                                             const std::vector<ImageTowerSpec>& towers,
                                             const ImageModelListOptions& list, std::shared_ptr<Gpt2Model> text,
                                             const torch::TensorOptions& p)
    : options_(o) {
  image_model = register_module("image_model", MultimodalImageEncoders(towers, list, p));
  text_model = register_module("text_model", std::move(text));
  if (o.freeze) freeze_matching(*this, *o.freeze);
}

void MultimodalSimpleModel::reset_parameters() {
  image_model->reset_parameters();
  text_model->reset_parameters();
}

torch::Tensor MultimodalSimpleModel::input_embeddings(const torch::Tensor& images, const torch::Tensor& locations,
                                                      const torch::Tensor& text_input_ids) {
  const torch::Tensor features = image_model(images);  // (B, I * N, width)
  const torch::Tensor where = locations.reshape({locations.size(0), -1}).to(torch::kLong);
  if (where.size(1) != features.size(1))
    throw std::invalid_argument("multimodal_simple: image_data_loc gives " + std::to_string(where.size(1)) +
                                " positions per sample, but its " + std::to_string(images.size(1)) + " image(s) give " +
                                std::to_string(features.size(1)) + " features (" +
                                std::to_string(image_model->features_per_image()) + " each, from every tower)");
  const torch::Tensor text = text_model->embed(text_input_ids);
  const int64_t B = text.size(0), T = text.size(1), C = text.size(2);
  // A spare position T takes the features of unused image slots (their
  // locations say T), and is dropped: modelzoo's zero column.
  const torch::Tensor padded = torch::cat({text, torch::zeros({B, 1, C}, text.options())}, 1);
  const torch::Tensor index = where.unsqueeze(-1).expand({B, where.size(1), C});
  return padded.scatter(1, index, features.to(text.scalar_type())).narrow(1, 0, T);
}

torch::Tensor MultimodalSimpleModel::padded_logits(const Features& batch) {
  return logits_with_key_padding(
      *text_model, input_embeddings(batch.at("image_data"), batch.at("image_data_loc"), batch.at("text_input_ids")),
      batch);
}

ModelOutput MultimodalSimpleModel::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor logits = padded_logits(batch);
  const LossScaling scaling{options_.loss_scaling, options_.loss_weight};
  return lm_loss(logits, batch.at("labels"), batch.at("loss_mask"), scaling, with_metrics, *text_model->vocab_size());
}

double MultimodalSimpleModel::forward_flops_per_token() const {
  // An image per sequence of max_positions tokens (max_num_img is the data's).
  return text_model->forward_flops_per_token() + image_model->flops_per_image() / double(text_model->max_positions());
}

namespace {

const std::vector<std::string>& multimodal_simple_features() {
  static const std::vector<std::string> names = {"image_data", "image_data_loc", "text_input_ids",
                                                 "loss_mask",  "labels",         "key_padding_mask"};
  return names;
}

class MultimodalSimpleSpec : public ModelSpec {
 public:
  MultimodalSimpleSpec(const YAML::Node& section, const config::Context& ctx) {
    options_ = MultimodalSimpleOptions::schema().parse(keys_except(section, {"image_model_list", "text_model"}), ctx,
                                                       nullptr, &origin_);
    parse_image_model_list(section, ctx);
    text_ = parse_decoder_tower(section, "text_model", ctx, "multimodal_simple");
    check(section, ctx);
  }

  YAML::Node to_yaml() const override {
    YAML::Node out = MultimodalSimpleOptions::schema().to_yaml(options_);
    YAML::Node list = ImageModelListOptions::schema().to_yaml(list_);
    YAML::Node models(YAML::NodeType::Sequence);
    for (const auto& t : towers_) {
      YAML::Node encoder(YAML::NodeType::Map), entry(YAML::NodeType::Map);
      encoder["name"] = "ViTModel";
      for (const auto& kv : VitOptions::schema().to_yaml(t.encoder)) encoder[kv.first] = kv.second;
      if (t.layer) encoder["image_layer_idx"] = *t.layer;
      entry["image_encoder"] = encoder;
      if (t.projection) entry["projection_layer"] = ProjectorOptions::schema().to_yaml(*t.projection);
      models.push_back(entry);
    }
    list["image_models"] = models;
    out["image_model_list"] = list;
    out["text_model"] = text_.to_yaml();
    return out;
  }
  std::shared_ptr<Model> build(const torch::TensorOptions& p) const override {
    auto model = std::make_shared<MultimodalSimpleModel>(options_, towers_, list_, text_.build_uninitialized(p), p);
    model->reset_parameters();
    return model;
  }
  std::vector<std::string> consumes() const override { return multimodal_simple_features(); }
  std::optional<int64_t> max_sequence_length() const override { return text_.spec->max_sequence_length(); }
  MultimodalSimpleParts parts() const { return {options_, list_, towers_, *text_.spec}; }

 private:
  // image_model_list: its own keys and the towers, in modelzoo's Trainer
  // layout ({image_encoder, projection_layer}) or its 2.3 one ({image_model:
  // [encoder, projection]}).
  void parse_image_model_list(const YAML::Node& section, const config::Context& ctx) {
    const YAML::Node list = section["image_model_list"];
    const config::Context list_ctx = ctx.child("image_model_list");
    if (!list.IsDefined() || !list.IsMap())
      ctx.fail(list.IsDefined() ? list : section, "image_model_list",
               "required: a mapping with image_models (the image towers)");
    list_ = ImageModelListOptions::schema().parse(keys_except(list, {"image_models"}), list_ctx);
    const YAML::Node models = list["image_models"];
    if (!models.IsDefined() || !models.IsSequence() || models.size() == 0)
      list_ctx.fail(models.IsDefined() ? models : list, "image_models",
                    "required: a list of image towers, each {image_encoder: {name: ViTModel, ...}, projection_layer: "
                    "{name: FeedForwardNetwork, ...} (optional)}");
    for (size_t k = 0; k < models.size(); ++k) {
      const config::Context entry_ctx = list_ctx.child("image_models[" + std::to_string(k) + "]");
      const YAML::Node entry = models[k];
      if (!entry.IsMap()) entry_ctx.fail(entry, "", "expected a mapping with image_encoder (and projection_layer)");
      // modelzoo 2.3: image_model: [encoder, projection (optional)].
      const bool listed = entry["image_model"].IsDefined();
      const YAML::Node pair = entry["image_model"];
      if (listed && (entry.size() != 1 || !pair.IsSequence() || pair.size() < 1 || pair.size() > 2))
        entry_ctx.fail(pair, "image_model", "expected a list of the image encoder and an optional projection");
      if (!listed)
        for (const auto& kv : entry) {
          const std::string key = kv.first.as<std::string>();
          if (key != "image_encoder" && key != "projection_layer")
            entry_ctx.fail(kv.first, key, "unknown key; an image tower has image_encoder and projection_layer");
        }
      if (!listed && !entry["image_encoder"]) entry_ctx.fail(entry, "image_encoder", "required: the tower's ViTModel");
      // Copies, not assignments: YAML::Node's operator= writes into the node.
      const YAML::Node encoder = listed ? pair[0] : entry["image_encoder"];
      const YAML::Node projection = listed ? (pair.size() == 2 ? pair[1] : YAML::Node()) : entry["projection_layer"];
      const config::Context encoder_ctx = entry_ctx.child(listed ? "image_model[0]" : "image_encoder");
      const config::Context projection_ctx = entry_ctx.child(listed ? "image_model[1]" : "projection_layer");
      if (!encoder.IsMap()) encoder_ctx.fail(encoder, "", "expected the image encoder's mapping (name: ViTModel, ...)");
      towers_.push_back(parse_tower(encoder, projection, encoder_ctx, projection_ctx));
    }
  }

  static ImageTowerSpec parse_tower(const YAML::Node& encoder, const YAML::Node& projection,
                                    const config::Context& encoder_ctx, const config::Context& projection_ctx) {
    NamedSection vit = named_mapping(encoder, encoder_ctx, "the image encoder, named ViTModel (or vit)");
    // image_layer_idx is the tower's, not the ViT's (zoo's vision_transformer refuses it).
    const YAML::Node layer = static_cast<const YAML::Node&>(vit.rest)["image_layer_idx"];
    vit.rest.remove("image_layer_idx");
    ImageTowerSpec t;
    t.encoder = parse_vit_tower(vit, encoder["name"], encoder_ctx, "multimodal_simple");
    if (layer.IsDefined() && !layer.IsNull()) {
      const int64_t L = t.encoder.num_hidden_layers;
      const int64_t idx = config::Value<int64_t>::parse(layer, encoder_ctx, "image_layer_idx");
      if (idx < -L || idx >= L)
        encoder_ctx.fail(layer, "image_layer_idx",
                         "expected a layer of the encoder's " + std::to_string(L) + " (" + std::to_string(-L) + " .. " +
                             std::to_string(L - 1) + ")");
      t.layer = layer_from_end(idx, L);
    }
    if (projection.IsDefined() && !projection.IsNull()) {
      YAML::Node copy = YAML::Clone(projection);
      t.projection = ProjectorOptions::schema().parse(copy, projection_ctx);
    }
    return t;
  }

  // The widths and lengths modelzoo leaves to the first forward pass.
  void check(const YAML::Node& section, const config::Context& ctx) const {
    const config::Context list_ctx = ctx.child("image_model_list");
    const YAML::Node list = section["image_model_list"];
    const bool patch = list_.image_feature_select_mode == "patch";
    const VitOptions& first = towers_.front().encoder;
    int64_t width = 0;
    for (size_t k = 0; k < towers_.size(); ++k) {
      const ImageTowerSpec& t = towers_[k];
      const std::string tower = "image_models[" + std::to_string(k) + "]";
      if (patch && !t.encoder.prepend_cls_token)
        list_ctx.fail(list["image_feature_select_mode"] ? list["image_feature_select_mode"] : list,
                      "image_feature_select_mode",
                      "patch drops the [CLS] feature, which needs " + tower + "'s prepend_cls_token");
      if (t.encoder.image_size != first.image_size || t.encoder.num_channels != first.num_channels)
        list_ctx.fail(list["image_models"][k], tower,
                      "its encoder takes images of " + std::to_string(t.encoder.num_channels) + " x " +
                          c10::str(c10::IntArrayRef(t.encoder.image_size)) + " and image_models[0]'s " +
                          std::to_string(first.num_channels) + " x " + c10::str(c10::IntArrayRef(first.image_size)) +
                          ": every tower reads the same images");
      if (t.projection && t.projection->input_unit != t.encoder.hidden_size)
        list_ctx.fail(list["image_models"][k], tower,
                      "its projection's input_unit is " + std::to_string(t.projection->input_unit) +
                          " but its encoder's hidden_size is " + std::to_string(t.encoder.hidden_size));
      if (k > 0 && t.width() != width)
        list_ctx.fail(list["image_models"][k], tower,
                      "its features are " + std::to_string(t.width()) + " wide and image_models[0]'s " +
                          std::to_string(width) +
                          ": the towers' features are joined along the patches, so each tower's (its projection's "
                          "last layers_units, else its hidden_size) must be as wide");
      width = t.width();
    }
    const auto& global = list_.global_image_projection;
    if (global && global->input_unit != width)
      list_ctx.fail(list["global_image_projection"], "global_image_projection",
                    "input_unit is " + std::to_string(global->input_unit) + " but the towers' features are " +
                        std::to_string(width) + " wide");
    if (global) width = global->output_unit();
    const Gpt2Options& text = text_.options();
    if (width != text.hidden_size)
      ctx.fail(list, "image_model_list",
               "the image features are " + std::to_string(width) + " wide and the decoder's input " +
                   std::to_string(text.hidden_size) +
                   ": a projection (global_image_projection, or each tower's projection_layer, whose last "
                   "layers_units is the text model's hidden_size) must join them");
    const int64_t per_image = features_per_image(towers_, patch);
    if (per_image > text.max_position_embeddings)
      ctx.fail(list, "image_model_list",
               "an image's " + std::to_string(per_image) +
                   " features exceed the text model's max_position_embeddings " +
                   std::to_string(text.max_position_embeddings));
  }

  MultimodalSimpleOptions options_;
  ImageModelListOptions list_;
  std::vector<ImageTowerSpec> towers_;
  DecoderTower text_;
};

}  // namespace

MultimodalSimpleParts multimodal_simple_parts(const ModelSpec& spec) {
  const auto* mm = dynamic_cast<const MultimodalSimpleSpec*>(&spec);
  if (!mm) throw std::invalid_argument("expected a multimodal_simple model section");
  return mm->parts();
}

ModelFamily multimodal_simple_family() {
  ModelFamily f;
  f.name = "multimodal_simple";
  f.doc =
      "modelzoo's multimodal_simple: image towers (ViTModel, each with an optional projection, then a global "
      "projection) whose features are scattered into a decoder's input at the data's image positions "
      "(text_model: a gpt2-family section such as LlamaModel); data: MultimodalSimpleHDF5MapDataProcessor.";
  f.consumes = multimodal_simple_features();
  f.parse = [](const YAML::Node& section, const config::Context& ctx) {
    return std::make_shared<const MultimodalSimpleSpec>(section, ctx);
  };
  f.fields = MultimodalSimpleOptions::schema().describe();
  f.fields.push_back({"image_model_list", "mapping", "required",
                      "image_feature_select_mode (patch, cls_patch), global_image_projection (FeedForwardNetwork), "
                      "image_models: a list of {image_encoder: ViTModel's keys with name ViTModel and image_layer_idx "
                      "(that layer's output, no final norm; null: the whole encoder), projection_layer: "
                      "FeedForwardNetwork}."});
  f.fields.push_back(
      {"text_model", "mapping", "required", "The decoder: its family's model section, with `name` (e.g. LlamaModel)."});
  f.accepts_key = [](const std::string& key) {
    return key == "image_model_list" || key == "text_model" || MultimodalSimpleOptions::schema().accepts_key(key);
  };
  f.required_keys = {"image_model_list", "text_model"};
  f.hf["mmsimple-llava"] = mmsimple_llava_hf_adapter();
  return f;
}

}  // namespace zoo::models
