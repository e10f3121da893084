// Implementation of data/processors/bertsum.h.
#include "data/processors/bertsum.h"

#include <fstream>

#include "data/csv_loader.h"

namespace zoo::data {

const config::Schema<BertSumOptions>& BertSumOptions::schema() {
  using O = BertSumOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (BertSumCSVDataProcessor)",
                         "BERTSUM rows of token ids, segment ids, [CLS] positions and their labels from modelzoo's "
                         "CSV files.");
    add_loader_fields(sc)
        .field("vocab_file", &O::vocab_file, "Vocabulary, one token per line; its [PAD] is the padding id.")
        .field("max_sequence_length", &O::max_sequence_length, "Tokens per sample.", config::positive<int64_t>())
        .field("max_cls_tokens", &O::max_cls_tokens, "Sentences ([CLS] positions) per sample.",
               config::positive<int64_t>())
        .field("pad_id", &O::pad_id, "Padding of every feature (null: [PAD]'s id).",
               config::if_set(config::non_negative<int64_t>()))
        .field("do_lower", &O::do_lower, "The vocabulary is lower case ([pad] is the padding token).")
        .field("shuffle_buffer", &O::shuffle_buffer,
               "modelzoo shuffles through a buffer of this many rows; zoo permutes all rows each epoch, so the "
               "value changes nothing.",
               config::if_set(config::positive<int64_t>()))
        .ignored({"mask_whole_word"}, "unused by modelzoo's BERTSUM data")
        .validate([](const O& o, const auto& fail) {
          if (o.vocab_file.empty() && !o.pad_id)
            fail("vocab_file", "required (its [PAD] gives the padding id), or set pad_id");
          if (o.max_sequence_length <= 0) fail("max_sequence_length", "required");
          if (o.max_cls_tokens <= 0) fail("max_cls_tokens", "required");
        });
    return sc;
  }();
  return s;
}

namespace {

// Line k of the vocabulary holds the token of id k.
int64_t id_in_vocab(const std::string& vocab_file, const std::string& token) {
  std::ifstream in(vocab_file);
  if (!in) throw LoaderOptionError("vocab_file", vocab_file + ": cannot be read");
  std::string line;
  for (int64_t id = 0; std::getline(in, line); ++id) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == token) return id;
  }
  throw LoaderOptionError("vocab_file", vocab_file + ": has no " + token + " token; set pad_id");
}

}  // namespace

BertSumSource::BertSumSource(const BertSumOptions& o) : o_(o) {
  pad_id_ = o.pad_id ? *o.pad_id : id_in_vocab(o.vocab_file, o.do_lower ? "[pad]" : "[PAD]");
  rows_ = std::make_unique<CsvTable>(
      o.data_dir.items, std::vector<std::string>{"input_token_ids", "labels", "segment_ids", "cls_indices"});
}

Features BertSumSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  const int64_t B = static_cast<int64_t>(ids.size()), T = o_.max_sequence_length, S = o_.max_cls_tokens;
  torch::Tensor input_ids = torch::full({B, T}, pad_id_, torch::kLong), segments = input_ids.clone(),
                labels = torch::full({B, S}, pad_id_, torch::kLong), cls = labels.clone();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = ids[static_cast<size_t>(b)];
    const CsvTable::Row row = rows_->row(i);
    // Each column into its padded row; a list longer than the row is an error naming it.
    auto fill = [&](const char* column, torch::Tensor& into, int64_t limit, const char* limit_key) {
      std::vector<int64_t> values;
      try {
        values = parse_python_int_list(row[column]);
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error(rows_->where(i) + ": " + column + ": " + e.what());
      }
      if (int64_t(values.size()) > limit)
        throw std::runtime_error(rows_->where(i) + ": " + column + " has " + std::to_string(values.size()) +
                                 " entries, more than " + limit_key + " " + std::to_string(limit));
      auto at = into.accessor<int64_t, 2>();
      for (size_t k = 0; k < values.size(); ++k) at[b][int64_t(k)] = values[k];
    };
    fill("input_token_ids", input_ids, T, "max_sequence_length");
    fill("segment_ids", segments, T, "max_sequence_length");
    fill("labels", labels, S, "max_cls_tokens");
    fill("cls_indices", cls, S, "max_cls_tokens");
    if (vocab_size && input_ids[b].max().item<int64_t>() >= *vocab_size)
      throw std::runtime_error(rows_->where(i) + ": a token id is not below the model's vocab_size " +
                               std::to_string(*vocab_size));
    if (cls[b].max().item<int64_t>() >= T)
      throw std::runtime_error(rows_->where(i) + ": a cls_indices entry is beyond max_sequence_length " +
                               std::to_string(T));
  }
  return {{"input_ids", input_ids},
          {"token_type_ids", segments},
          {"attention_mask", (input_ids != pad_id_).to(torch::kLong)},
          {"labels", labels},
          {"cls_indices", cls},
          {"cls_weights", (cls != pad_id_).to(torch::kFloat)}};
}

DataProcessor bertsum_processor() {
  return make_data_processor<BertSumOptions>(
      "BertSumCSVDataProcessor",
      "BERTSUM: modelzoo's CSV rows of input_token_ids, segment_ids, cls_indices and labels, with vocab_file's "
      "[PAD] as padding.",
      {"input_ids", "token_type_ids", "attention_mask", "labels", "cls_indices", "cls_weights"},
      open_csv<BertSumSource, BertSumOptions>);
}

}  // namespace zoo::data
