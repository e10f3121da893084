// Implementation of data/processors/ner.h.
#include "data/processors/ner.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/csv_loader.h"

namespace zoo::data {

const config::Schema<NerOptions>& NerOptions::schema() {
  using O = NerOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (BertTokenClassifierDataProcessor)",
                         "NER rows of split tokens and their labels from modelzoo's CSV files.");
    add_loader_fields(sc)
        .field("vocab_file", &O::vocab_file, "Vocabulary, one token per line (line k is id k).")
        .field("label_vocab_file", &O::label_vocab_file, "JSON mapping of label names to class ids.")
        .field("do_lower", &O::do_lower, "Lower-case the tokens and the vocabulary.")
        .field("max_sequence_length", &O::max_sequence_length, "Tokens per sample.", config::positive<int64_t>())
        .field("include_padding_in_loss", &O::include_padding_in_loss, "loss_mask keeps padding too.")
        .field("labels_pad_id", &O::labels_pad_id, "Label of padding (null: [PAD]'s id).")
        .field("input_pad_id", &O::input_pad_id, "input_ids of padding (null: [PAD]'s id).")
        .field("attn_mask_pad_id", &O::attn_mask_pad_id, "attention_mask of padding (null: [PAD]'s id).")
        .field("shuffle_buffer", &O::shuffle_buffer,
               "modelzoo shuffles through a buffer of this many rows; zoo permutes all rows each epoch, so the "
               "value changes nothing.",
               config::if_set(config::positive<int64_t>()))
        .ignored({"mask_whole_word"}, "unused by modelzoo's token classifier data")
        .validate([](const O& o, const auto& fail) {
          if (o.vocab_file.empty()) fail("vocab_file", "required: the vocabulary the tokens are looked up in");
          if (o.label_vocab_file.empty()) fail("label_vocab_file", "required: the JSON of label names to class ids");
          if (o.max_sequence_length <= 0) fail("max_sequence_length", "required");
        });
    return sc;
  }();
  return s;
}

NerSource::NerSource(const NerOptions& o) : o_(o) {
  try {
    vocab_ = std::make_unique<text::WordPieceTokenizer>(o.vocab_file, o.do_lower);
  } catch (const std::exception& e) {
    throw LoaderOptionError("vocab_file", e.what());
  }
  pad_id_ = vocab_->contains("[PAD]") ? vocab_->id("[PAD]") : 0;
  std::ifstream in(o.label_vocab_file);
  if (!in) throw LoaderOptionError("label_vocab_file", o.label_vocab_file + ": cannot be read");
  const nlohmann::json labels = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!labels.is_object())
    throw LoaderOptionError("label_vocab_file", o.label_vocab_file + ": expected a JSON object of label names to ids");
  for (const auto& [name, id] : labels.items()) {
    if (!id.is_number_integer())
      throw LoaderOptionError("label_vocab_file", o.label_vocab_file + ": label '" + name + "' has no integer id");
    labels_[name] = id.get<int64_t>();
  }
  rows_ = std::make_unique<CsvTable>(o.data_dir.items, std::vector<std::string>{"tokens", "labels"});
}

Features NerSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  const int64_t B = static_cast<int64_t>(ids.size()), T = o_.max_sequence_length;
  torch::Tensor input_ids = torch::full({B, T}, o_.input_pad_id.value_or(pad_id_), torch::kLong),
                attention = torch::full({B, T}, o_.attn_mask_pad_id.value_or(pad_id_), torch::kLong),
                labels = torch::full({B, T}, o_.labels_pad_id.value_or(pad_id_), torch::kLong);
  auto ids_at = input_ids.accessor<int64_t, 2>(), attention_at = attention.accessor<int64_t, 2>(),
       labels_at = labels.accessor<int64_t, 2>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = ids[static_cast<size_t>(b)];
    const CsvTable::Row row = rows_->row(i);
    std::istringstream tokens(row["tokens"]), names(row["labels"]);
    int64_t t = 0;
    for (std::string token, name; tokens >> token; ++t) {
      if (!(names >> name))
        throw std::runtime_error(rows_->where(i) + ": fewer labels than tokens (" + std::to_string(t) + ")");
      if (t >= T)
        throw std::runtime_error(rows_->where(i) + ": more tokens than max_sequence_length " + std::to_string(T));
      const auto label = labels_.find(name);
      if (label == labels_.end())
        throw std::runtime_error(rows_->where(i) + ": label '" + name + "' is not in " + o_.label_vocab_file);
      ids_at[b][t] = vocab_->id(token);
      if (vocab_size && ids_at[b][t] >= *vocab_size)
        throw std::runtime_error(rows_->where(i) + ": token '" + token + "' has id " + std::to_string(ids_at[b][t]) +
                                 ", not below the model's vocab_size " + std::to_string(*vocab_size));
      attention_at[b][t] = 1;
      labels_at[b][t] = label->second;
    }
  }
  const torch::Tensor loss_mask = o_.include_padding_in_loss ? torch::ones({B, T}, torch::kLong) : attention.clone();
  return {{"input_ids", input_ids},
          {"attention_mask", attention},
          {"loss_mask", loss_mask},
          {"token_type_ids", torch::zeros({B, T}, torch::kLong)},
          {"labels", labels}};
}

DataProcessor ner_processor() {
  return make_data_processor<NerOptions>(
      "BertTokenClassifierDataProcessor",
      "NER: modelzoo's CSV rows of split `tokens` and their `labels`, with vocab_file and label_vocab_file.",
      {"input_ids", "attention_mask", "loss_mask", "token_type_ids", "labels"}, open_csv<NerSource, NerOptions>);
}

}  // namespace zoo::data
