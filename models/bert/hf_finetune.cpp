// Hugging Face's fine-tuned BERTs <-> zoo's fine-tuning families, by
// modelzoo's converter names:
//   bert-sequence-classifier  BertForSequenceClassification <-> bert/classifier
//                             (the pooler's tanh state, dropout, classifier);
//   bert-token-classifier     BertForTokenClassification <-> bert/token_classifier
//                             (every token's state, dropout, classifier; no pooler);
//   bert-qa                   BertForQuestionAnswering <-> bert/qa (every token's
//                             state, qa_outputs <-> classifier: start and end scores).
// The encoder is BERT's (hf_adapter.cpp) under bert. on both sides. HF's
// num_labels (the length of id2label) is num_labels / num_classes,
// classifier_dropout (null: hidden_dropout_prob) is task_dropout /
// encoder_output_dropout_rate, and an unset problem_type is regression for
// one label and single_label_classification otherwise, as HF's loss decides
// for integer labels (modelzoo's converter asks the user to set it).
#include <fstream>

#include "models/bert/classifier.h"
#include "models/bert/hf_adapter.h"
#include "models/bert/qa.h"
#include "models/bert/token_classifier.h"

namespace zoo::models {
namespace {

const char* kSequenceClassifier = "BertForSequenceClassification";
const char* kTokenClassifier = "BertForTokenClassification";
const char* kQuestionAnswering = "BertForQuestionAnswering";

// The encoder's keys as the fine-tuning families spell them (embedding_pad_token_id), named `family`.
YAML::Node finetune_shape(const nlohmann::json& c, const std::string& family) {
  YAML::Node m = bert_encoder_shape(c);
  m["name"] = family;
  m["embedding_pad_token_id"] = m["pad_token_id"];
  m.remove("pad_token_id");
  return m;
}

// HF derives num_labels from id2label; older files give num_labels, and its default is 2.
int64_t num_labels(const nlohmann::json& c) {
  if (c.contains("id2label") && c.at("id2label").is_object() && !c.at("id2label").empty())
    return int64_t(c.at("id2label").size());
  return config_get<int64_t>(c, {"num_labels"}, 2);
}

double classifier_dropout(const nlohmann::json& c) {
  return config_get<double>(c, {"classifier_dropout", "hidden_dropout_prob"}, 0.1);
}

// id2label / label2id for `names` (class id -> name).
void write_labels(nlohmann::json& config, const std::vector<std::string>& names) {
  config["id2label"] = nlohmann::json::object();
  config["label2id"] = nlohmann::json::object();
  for (size_t i = 0; i < names.size(); ++i) {
    config["id2label"][std::to_string(i)] = names[i];
    config["label2id"][names[i]] = int64_t(i);
  }
}

std::vector<std::string> default_label_names(int64_t n) {
  std::vector<std::string> names;
  for (int64_t i = 0; i < n; ++i) names.push_back("LABEL_" + std::to_string(i));
  return names;
}

// A token classifier's class names: its label_vocab_file's when it has one, else LABEL_<id>.
std::vector<std::string> label_names(const BertTokenClassifierOptions& o) {
  std::vector<std::string> names = default_label_names(*o.num_classes);
  if (!o.label_vocab_file) return names;
  std::ifstream in(*o.label_vocab_file);
  const nlohmann::json labels = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (labels.is_object())
    for (const auto& [name, id] : labels.items())
      if (id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < *o.num_classes)
        names[size_t(id.get<int64_t>())] = name;
  return names;
}

// The encoder's and the head's tensors (HF's `head`, zoo's classifier); `pooler`: the sequence classifier's.
HfKeyMap finetune_keys(const BertEncoderOptions& o, bool pooler, const std::string& head) {
  HfKeyMap m;
  m.hf_prefix = "bert.";
  m.hf_buffers = {"embeddings.position_ids", "embeddings.token_type_ids"};
  // A token classifier saved with a pooler (HF builds it without one, and ignores it).
  if (!pooler) m.hf_buffers.push_back("pooler.dense.");
  map_bert_encoder(m, o, "bert.", "bert.", o.num_segments.value_or(2), pooler);
  m.linear(head, "classifier");
  return m;
}

const BertClassifierOptions& classifier_options(const ModelSpec& m) {
  return spec_options<TypedModelSpec<BertClassifierOptions, BertClassifierModel>>(
      m, "this Hugging Face converter takes a bert/classifier model section");
}
const BertQaOptions& qa_options(const ModelSpec& m) {
  return spec_options<TypedModelSpec<BertQaOptions, BertQaModel>>(
      m, "this Hugging Face converter takes a bert/qa model section");
}
const BertTokenClassifierOptions& token_classifier_options(const ModelSpec& m) {
  return spec_options<TypedModelSpec<BertTokenClassifierOptions, BertTokenClassifierModel>>(
      m, "this Hugging Face converter takes a bert/token_classifier model section");
}

// What both converters share: HF's `architecture` of model_type bert, the
// tensors (with the pooler when `pooler`), the encoder's config.json fields
// (`head_fields` adds the head's), and fine-tuning data read by `processor`
// with the checkpoint's vocab.txt; `options_of` the family's.
template <class Options>
HfAdapter finetune_adapter(const std::string& architecture, bool pooler, const std::string& head,
                           const std::string& processor, const Options& (*options_of)(const ModelSpec&),
                           void (*head_fields)(const Options&, nlohmann::json&)) {
  HfAdapter a;
  a.config_to_hf = [architecture, pooler, options_of, head_fields](const ModelSpec& model) {
    const Options& o = options_of(model);
    check_bert_layout_export(ExportCheck("bert"), o, /*roberta=*/false, pooler);
    nlohmann::json c = bert_encoder_config(o, false, o.num_segments.value_or(2));
    c["architectures"] = {architecture};
    head_fields(o, c);
    return c;
  };
  a.model_types = {"bert"};
  a.claims = [architecture](const nlohmann::json& c) { return hf_architecture(c) == architecture; };
  a.from_hf = [pooler, head, options_of](const StateDict& hf, const ModelSpec& m) {
    return map_to_zoo(finetune_keys(options_of(m), pooler, head), hf);
  };
  a.to_hf = [pooler, head, options_of](const StateDict& zoo, const ModelSpec& m) {
    const Options& o = options_of(m);
    StateDict hf = map_to_hf(finetune_keys(o, pooler, head), zoo);
    add_missing_token_types(hf, "bert.", o.num_segments.value_or(2), o.hidden_size);
    return hf;
  };
  a.input_from_hf = [processor](const nlohmann::json&, const YAML::Node& model, const std::string& hf_dir) {
    YAML::Node in(YAML::NodeType::Map);
    in["data_processor"] = processor;
    read_wordpiece_settings(in, hf_dir);
    in["max_sequence_length"] = std::min<int64_t>(128, model["max_position_embeddings"].as<int64_t>());
    return in;
  };
  return a;
}

}  // namespace

HfAdapter bert_sequence_classifier_hf_adapter() {
  // GLUE-style sentences (SST-2's TSV; MNLIDataProcessor for sentence pairs).
  HfAdapter a = finetune_adapter(
      kSequenceClassifier, /*pooler=*/true, "classifier", "SST2DataProcessor", classifier_options,
      +[](const BertClassifierOptions& o, nlohmann::json& c) {
        c["problem_type"] = *o.problem_type;
        c["classifier_dropout"] = *o.task_dropout;
        write_labels(c, default_label_names(*o.num_labels));
      });
  a.config_from_hf = [](const nlohmann::json& c) {
    YAML::Node m = finetune_shape(c, "bert/classifier");
    const int64_t labels = num_labels(c);
    m["num_labels"] = labels;
    m["problem_type"] =
        config_get<std::string>(c, {"problem_type"}, labels == 1 ? "regression" : "single_label_classification");
    m["task_dropout"] = classifier_dropout(c);
    return m;
  };
  return a;
}

HfAdapter bert_token_classifier_hf_adapter() {
  // modelzoo's NER CSV.
  HfAdapter a = finetune_adapter(
      kTokenClassifier, /*pooler=*/false, "classifier", "BertTokenClassifierDataProcessor", token_classifier_options,
      +[](const BertTokenClassifierOptions& o, nlohmann::json& c) {
        c["classifier_dropout"] = *o.encoder_output_dropout_rate;
        write_labels(c, label_names(o));
      });
  a.config_from_hf = [](const nlohmann::json& c) {
    YAML::Node m = finetune_shape(c, "bert/token_classifier");
    m.remove("pooler_nonlinearity");
    m["num_classes"] = num_labels(c);
    m["encoder_output_dropout_rate"] = classifier_dropout(c);
    return m;
  };
  a.label_vocab_from_hf = [](const nlohmann::json& c) {
    nlohmann::json labels = nlohmann::json::object();
    if (c.contains("id2label") && c.at("id2label").is_object())
      for (const auto& [id, name] : c.at("id2label").items()) {
        if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
          refuse_config(c, "id2label", "has a key that is not a class id (`" + id + "`)");
        labels[name.is_string() ? name.get<std::string>() : name.dump()] = std::stoll(id);
      }
    else
      for (int64_t i = 0; i < num_labels(c); ++i) labels["LABEL_" + std::to_string(i)] = i;
    return labels;
  };
  return a;
}

HfAdapter bert_qa_hf_adapter() {
  // modelzoo's SQuAD CSV (write_csv_qa.py).
  HfAdapter a = finetune_adapter(
      kQuestionAnswering, /*pooler=*/false, "qa_outputs", "BertQADataProcessor", qa_options,
      +[](const BertQaOptions&, nlohmann::json& c) { write_labels(c, default_label_names(2)); });
  a.config_from_hf = [](const nlohmann::json& c) {
    if (num_labels(c) != 2)
      refuse_config(c, "num_labels",
                    "is " + std::to_string(num_labels(c)) + "; a question-answering head has 2 (start, end)");
    YAML::Node m = finetune_shape(c, "bert/qa");
    m.remove("pooler_nonlinearity");
    return m;
  };
  // The CSV holds token ids already (write_csv_qa.py tokenized with the vocabulary): no vocab_file to read.
  a.input_from_hf = [](const nlohmann::json&, const YAML::Node& model, const std::string&) {
    YAML::Node in(YAML::NodeType::Map);
    in["data_processor"] = "BertQADataProcessor";
    in["max_sequence_length"] = std::min<int64_t>(384, model["max_position_embeddings"].as<int64_t>());
    return in;
  };
  return a;
}

}  // namespace zoo::models
