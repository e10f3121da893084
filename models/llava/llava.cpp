// Implementation of models/llava/llava.h.
#include "models/llava/llava.h"

#include <cmath>

#include "models/common/freeze.h"
#include "models/common/lm_loss.h"
#include "models/common/multimodal_towers.h"
#include "models/llava/hf_adapter.h"

namespace zoo::models {

const config::Schema<LlavaProjectors>& LlavaProjectors::schema() {
  using O = LlavaProjectors;
  static const config::Schema<O> s =
      config::Schema<O>("model.projector", "One projector per modality.")
          .field("image_model", &O::image_model, "Projects the image features to the decoder's width.")
          .field("text_model", &O::text_model, "Projects the text embeddings before the decoder.");
  return s;
}

const config::Schema<LlavaOptions>& LlavaOptions::schema() {
  using O = LlavaOptions;
  static const config::Schema<O> s =
      config::Schema<O>("model (llava)",
                        "LLaVA: `image_model` (ViTModel's keys, with its name) and `text_model` (a decoder's model "
                        "section, with its name, e.g. LlamaModel), joined by `projector`.")
          .field("freeze", &O::freeze,
                 "Regexes: parameters of the modules whose names match (e.g. ^image_model, ^text_model) do not train.")
          .field("image_feature_select_layer_idx", &O::image_feature_select_layer_idx,
                 "The image layer (0-based; negative counts from the last) whose output, before the final norm, "
                 "becomes the image features.")
          .field("image_start_idx", &O::image_start_idx,
                 "The sequence position of the first image feature (the data's first image placeholder).",
                 config::non_negative<int64_t>())
          .field("image_feature_select_mode", &O::image_feature_select_mode,
                 "patch: the patches' features only; cls_patch: [CLS]'s too.", config::one_of({"patch", "cls_patch"}))
          .field("loss_scaling", &O::loss_scaling,
                 "num_tokens: loss sum / counted tokens; batch_size: / B * loss_weight.",
                 config::one_of({"num_tokens", "batch_size"}))
          .field("loss_weight", &O::loss_weight, "Factor with loss_scaling batch_size.")
          .field("projector", &O::projector, "Projectors by modality: image_model, text_model.")
          .validate([](const O& o, const auto& fail) {
            if (o.freeze)
              if (const std::string bad = check_freeze_patterns(*o.freeze); !bad.empty()) fail("freeze", bad);
          });
  return s;
}

LlavaModel::LlavaModel(const LlavaOptions& o, const VitOptions& image, std::shared_ptr<Gpt2Model> text,
                       const torch::TensorOptions& p)
    : options_(o), image_options_(image) {
  const int64_t L = image.num_hidden_layers;
  feature_layer_ = layer_from_end(o.image_feature_select_layer_idx, L);
  image_model = register_module("image_model", VitEncoder(image, p));
  text_model = register_module("text_model", std::move(text));
  if (o.projector && o.projector->image_model)
    projector_image_model =
        register_module("projector_image_model", Projector(*o.projector->image_model, p, ProjectorInit::kTorchLinear));
  if (o.projector && o.projector->text_model)
    projector_text_model =
        register_module("projector_text_model", Projector(*o.projector->text_model, p, ProjectorInit::kTorchLinear));
  if (o.freeze) freeze_matching(*this, *o.freeze);
}

void LlavaModel::reset_parameters() {
  image_model->reset_parameters();
  text_model->reset_parameters();
  if (projector_image_model) projector_image_model->reset_parameters();
  if (projector_text_model) projector_text_model->reset_parameters();
}

namespace {
// The image features each sample gets: the tower's sequence, less [CLS] in patch mode.
int64_t image_features(const LlavaOptions& o, const VitOptions& image) {
  return tower_features(image, o.image_feature_select_mode == "patch");
}
}  // namespace

int64_t LlavaModel::num_image_features() const { return image_features(options_, image_options_); }

torch::Tensor LlavaModel::input_embeddings(const torch::Tensor& images, const torch::Tensor& text_input_ids) {
  torch::Tensor features = image_model->features(images, feature_layer_);
  if (options_.image_feature_select_mode == "patch") features = features.narrow(1, 1, features.size(1) - 1);
  if (projector_image_model) features = projector_image_model(features);
  torch::Tensor text = text_model->embed(text_input_ids);
  if (projector_text_model) text = projector_text_model(text);
  const int64_t T = text.size(1), start = options_.image_start_idx, N = features.size(1);
  if (start + N > T)
    throw std::invalid_argument("llava: the image's " + std::to_string(N) + " features from image_start_idx " +
                                std::to_string(start) + " do not fit the batch's " + std::to_string(T) + " positions");
  return torch::cat(
      {text.narrow(1, 0, start), features.to(text.scalar_type()), text.narrow(1, start + N, T - start - N)}, 1);
}

torch::Tensor LlavaModel::padded_logits(const Features& batch) {
  return logits_with_key_padding(*text_model, input_embeddings(batch.at("image_data"), batch.at("text_input_ids")),
                                 batch);
}

ModelOutput LlavaModel::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor logits = padded_logits(batch);
  const LossScaling scaling{options_.loss_scaling, options_.loss_weight};
  return lm_loss(logits, batch.at("labels"), batch.at("loss_mask"), scaling, with_metrics, *text_model->vocab_size());
}

double LlavaModel::forward_flops_per_token() const {
  VitOptions used = image_options_;
  used.num_hidden_layers = feature_layer_ + 1;  // the layers after the used one never run
  double image = vit_encoder_flops(used);
  if (projector_image_model) image += projector_image_model->flops_per_vector() * double(num_image_features());
  const double T = double(text_model->max_positions());
  double text = text_model->forward_flops_per_token();
  if (projector_text_model) text += projector_text_model->flops_per_vector();
  return text + image / T;
}

namespace {

const std::vector<std::string>& llava_features() {
  static const std::vector<std::string> names = {"image_data", "text_input_ids", "loss_mask", "labels",
                                                 "key_padding_mask"};
  return names;
}

class LlavaSpec : public ModelSpec {
 public:
  LlavaSpec(const YAML::Node& section, const config::Context& ctx) {
    options_ =
        LlavaOptions::schema().parse(keys_except(section, {"image_model", "text_model"}), ctx, nullptr, &origin_);

    const NamedSection image = named_section(section, "image_model", ctx, "the image tower, named ViTModel (or vit)");
    image_ = parse_vit_tower(image, section["image_model"]["name"], ctx.child("image_model"), "llava");
    text_ = parse_decoder_tower(section, "text_model", ctx, "llava");
    const Gpt2Options& t = text_.options();
    check(section, ctx, t);
  }

  YAML::Node to_yaml() const override {
    YAML::Node out = LlavaOptions::schema().to_yaml(options_);
    YAML::Node image(YAML::NodeType::Map);
    image["name"] = "ViTModel";
    for (const auto& kv : VitOptions::schema().to_yaml(image_)) image[kv.first] = kv.second;
    out["image_model"] = image;
    out["text_model"] = text_.to_yaml();
    return out;
  }
  std::shared_ptr<Model> build(const torch::TensorOptions& p) const override {
    auto model = std::make_shared<LlavaModel>(options_, image_, text_.build_uninitialized(p), p);
    model->reset_parameters();
    return model;
  }
  std::vector<std::string> consumes() const override { return llava_features(); }
  std::optional<int64_t> max_sequence_length() const override { return text_.spec->max_sequence_length(); }
  LlavaParts parts() const { return {options_, image_, *text_.spec}; }

 private:
  // The shapes modelzoo leaves to the first forward pass.
  void check(const YAML::Node& section, const config::Context& ctx, const Gpt2Options& text) const {
    const int64_t L = image_.num_hidden_layers, idx = options_.image_feature_select_layer_idx;
    const YAML::Node at =
        section["image_feature_select_layer_idx"] ? section["image_feature_select_layer_idx"] : section;
    if (idx < -L || idx >= L)
      ctx.fail(at, "image_feature_select_layer_idx",
               "expected a layer of the image model's " + std::to_string(L) + " (" + std::to_string(-L) + " .. " +
                   std::to_string(L - 1) + ")");
    if (options_.image_feature_select_mode == "patch" && !image_.prepend_cls_token)
      ctx.fail(section["image_feature_select_mode"] ? section["image_feature_select_mode"] : section,
               "image_feature_select_mode", "patch drops the [CLS] feature, which needs image_model.prepend_cls_token");
    const auto& proj = options_.projector;
    const int64_t image_width = proj && proj->image_model ? proj->image_model->layers_units.back() : image_.hidden_size;
    const int64_t text_width = proj && proj->text_model ? proj->text_model->layers_units.back() : text.hidden_size;
    if (proj && proj->image_model && proj->image_model->input_unit != image_.hidden_size)
      ctx.fail(section["projector"], "projector",
               "image_model.input_unit is " + std::to_string(proj->image_model->input_unit) +
                   " but the image model's hidden_size is " + std::to_string(image_.hidden_size));
    if (proj && proj->text_model && proj->text_model->input_unit != text.hidden_size)
      ctx.fail(section["projector"], "projector",
               "text_model.input_unit is " + std::to_string(proj->text_model->input_unit) +
                   " but the text model's hidden_size is " + std::to_string(text.hidden_size));
    if (image_width != text_width)
      ctx.fail(section["projector"] ? section["projector"] : section, "projector",
               "the image features are " + std::to_string(image_width) + " wide and the decoder's input " +
                   std::to_string(text_width) +
                   ": a projector (projector.image_model.layers_units ending in the text model's hidden_size) must "
                   "join them");
    const int64_t features = image_features(options_, image_);
    if (options_.image_start_idx + features > text.max_position_embeddings)
      ctx.fail(section["image_start_idx"] ? section["image_start_idx"] : section, "image_start_idx",
               "the image's " + std::to_string(features) + " features from position " +
                   std::to_string(options_.image_start_idx) + " exceed the text model's max_position_embeddings " +
                   std::to_string(text.max_position_embeddings));
  }

  LlavaOptions options_;
  VitOptions image_;
  DecoderTower text_;
};

}  // namespace

LlavaParts llava_parts(const ModelSpec& spec) {
  const auto* llava = dynamic_cast<const LlavaSpec*>(&spec);
  if (!llava) throw std::invalid_argument("expected a llava model section");
  return llava->parts();
}

ModelFamily llava_family() {
  ModelFamily f;
  f.name = "llava";
  f.doc =
      "LLaVA: a ViT image tower's features, projected, in place of image placeholder tokens of a decoder "
      "(text_model: a gpt2-family section such as LlamaModel), as modelzoo's llava; data: LlavaHDF5MapDataProcessor.";
  f.consumes = llava_features();
  f.parse = [](const YAML::Node& section, const config::Context& ctx) {
    return std::make_shared<const LlavaSpec>(section, ctx);
  };
  f.fields = LlavaOptions::schema().describe();
  f.fields.push_back(
      {"image_model", "mapping", "required",
       "The image tower: ViTModel's keys (vision_transformer's, less the classifier's), with name ViTModel."});
  f.fields.push_back(
      {"text_model", "mapping", "required", "The decoder: its family's model section, with `name` (e.g. LlamaModel)."});
  f.accepts_key = [](const std::string& key) {
    return key == "image_model" || key == "text_model" || LlavaOptions::schema().accepts_key(key);
  };
  f.required_keys = {"image_model", "text_model"};
  f.hf["llava"] = llava_hf_adapter();
  return f;
}

}  // namespace zoo::models
