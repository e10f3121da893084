// Implementation of data/processors/bert_csv.h.
#include "data/processors/bert_csv.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "data/csv_loader.h"
#include "data/splitmix.h"

namespace zoo::data {

const config::Schema<BertCsvOptions>& BertCsvOptions::schema() {
  using O = BertCsvOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (BertCSVDynamicMaskDataProcessor)",
                         "BERT masked-LM (+ NSP) samples from modelzoo's pre-training CSV files, masked as read.");
    add_loader_fields(sc)
        .field("vocab_file", &O::vocab_file, "WordPiece vocabulary, one token per line (line k is id k).")
        .field("max_sequence_length", &O::max_sequence_length, "Tokens per sample, [CLS] and [SEP]s included.",
               config::positive<int64_t>())
        .field("max_predictions_per_seq", &O::max_predictions_per_seq, "Most masked positions per sample.",
               config::positive<int64_t>())
        .field("masked_lm_prob", &O::masked_lm_prob, "Share of the tokens that are masked.",
               config::in_range(0.0, 1.0, false))
        .field("disable_nsp", &O::disable_nsp,
               "Masked LM only: no token_type_ids or next_sentence_label, and rows longer than "
               "max_sequence_length are cut (with NSP they are an error).")
        .field("do_lower", &O::do_lower, "Lower-case the tokens and the vocabulary (ASCII letters).")
        .field("mask_whole_word", &O::mask_whole_word, "Mask every WordPiece of a word (## continuations) together.")
        .field("gather_mlm_labels", &O::gather_mlm_labels,
               "labels / masked_lm_mask hold max_predictions_per_seq slots with masked_lm_positions (true), or one "
               "per token (false).")
        .field("oov_token", &O::oov_token, "Token that words missing from the vocabulary become.")
        .field("mask_token", &O::mask_token, "Token that 80% of the masked positions become.")
        .field("document_separator_token", &O::document_separator_token, "Separator token (must be in the vocabulary).")
        .field("exclude_from_masking", &O::exclude_from_masking, "Tokens never masked.")
        .field("labels_pad_id", &O::labels_pad_id, "Label of unmasked / padding slots.")
        .field("input_pad_id", &O::input_pad_id, "input_ids of padding.")
        .field("attn_mask_pad_id", &O::attn_mask_pad_id, "attention_mask of padding.")
        .field("segment_pad_id", &O::segment_pad_id, "token_type_ids of padding.")
        .field("shuffle_buffer", &O::shuffle_buffer,
               "modelzoo shuffles through a buffer of this many rows; zoo permutes all rows each epoch, so the "
               "value changes nothing.",
               config::if_set(config::positive<int64_t>()))
        .ignored({"vocab_size", "num_examples", "steps"}, "deprecated in modelzoo: vocab_file and meta.dat decide them")
        .ignored({"whole_word_masking"}, "modelzoo does not read it; mask_whole_word is the key")
        .ignored({"buckets"}, "zoo batches rows in order without length buckets; the samples are the same")
        .validate([](const O& o, const auto& fail) {
          if (o.vocab_file.empty()) fail("vocab_file", "required: the vocabulary the tokens are looked up in");
          if (o.max_sequence_length <= 0) fail("max_sequence_length", "required");
          if (o.max_predictions_per_seq <= 0) fail("max_predictions_per_seq", "required");
        });
    return sc;
  }();
  return s;
}

BertCsvSource::BertCsvSource(const BertCsvOptions& o) : o_(o) {
  // The vocabulary: line k is id k (a repeated token keeps its last line, as modelzoo's dict).
  try {
    vocab_ = LineVocabulary(o.vocab_file, o.do_lower);
  } catch (const std::runtime_error& e) {
    throw LoaderOptionError("vocab_file", e.what());
  }
  const int64_t lines = vocab_.size();
  auto id_of = [&](const std::string& token, const char* key) {
    const auto id = vocab_.find(token);
    if (!id) throw LoaderOptionError(key, "'" + token + "' is not in vocab_file " + o.vocab_file);
    return *id;
  };
  oov_id_ = id_of(o.oov_token, "oov_token");
  mask_id_ = id_of(o.mask_token, "mask_token");
  id_of(o.document_separator_token, "document_separator_token");
  std::vector<bool> excluded(static_cast<size_t>(lines), false);
  for (const auto& t : o.exclude_from_masking) {
    excluded_tokens_.insert(o.do_lower ? lower_ascii(t) : t);
    excluded[static_cast<size_t>(vocab_.id(t, oov_id_))] = true;  // modelzoo: unknown -> oov
  }
  for (int64_t id = 0; id < lines; ++id)
    if (!excluded[static_cast<size_t>(id)]) replacement_pool_.push_back(id);

  std::vector<std::string> required = {"tokens"};
  if (!o.disable_nsp) required.insert(required.end(), {"segment_ids", "is_random_next"});
  rows_ = std::make_unique<CsvTable>(o.data_dir.items, required);
}

BertCsvSource::Sample BertCsvSource::read_row(int64_t i) const {
  const CsvTable::Row row = rows_->row(i);
  Sample s;
  try {
    s.tokens = parse_python_string_list(row["tokens"]);
    if (o_.disable_nsp) return s;
    s.segments = parse_python_int_list(row["segment_ids"]);
    s.is_random_next = std::stoll(row["is_random_next"]);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(rows_->where(i) + ": " + e.what());
  }
  return s;
}

namespace {
// modelzoo's get_whole_word_span: the word (first piece and its ## continuations) around `start`.
std::pair<int64_t, int64_t> whole_word_span(const std::vector<std::string>& tokens, int64_t start) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  auto continues = [&](int64_t k) { return tokens[static_cast<size_t>(k)].rfind("##", 0) == 0; };
  int64_t end = n;
  if (start < n - 1) {
    end = start + 1;
    while (continues(end) && ++end <= n - 1) {
    }
  }
  while (continues(start) && start > 0) --start;
  return {start, end};
}
}  // namespace

Features BertCsvSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  const int64_t B = static_cast<int64_t>(ids.size()), T = o_.max_sequence_length, P = o_.max_predictions_per_seq;
  const int64_t slots = o_.gather_mlm_labels ? P : T;
  torch::Tensor input_ids = torch::full({B, T}, o_.input_pad_id, torch::kLong),
                attention = torch::full({B, T}, o_.attn_mask_pad_id, torch::kLong),
                segments = torch::full({B, T}, o_.segment_pad_id, torch::kLong),
                labels = torch::full({B, slots}, o_.gather_mlm_labels ? 0 : o_.labels_pad_id, torch::kLong),
                mlm_mask = torch::zeros({B, slots}, torch::kLong), positions = torch::zeros({B, P}, torch::kLong),
                nsp = torch::zeros({B}, torch::kLong);
  auto ids_at = input_ids.accessor<int64_t, 2>(), attention_at = attention.accessor<int64_t, 2>(),
       segments_at = segments.accessor<int64_t, 2>(), labels_at = labels.accessor<int64_t, 2>(),
       mask_at = mlm_mask.accessor<int64_t, 2>(), positions_at = positions.accessor<int64_t, 2>();
  auto nsp_at = nsp.accessor<int64_t, 1>();
  const int64_t n_rows = num_samples();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t epoch = ids[static_cast<size_t>(b)] / n_rows, i = ids[static_cast<size_t>(b)] % n_rows;
    Sample s = read_row(i);
    if (o_.disable_nsp && static_cast<int64_t>(s.tokens.size()) > T) s.tokens.resize(static_cast<size_t>(T));
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n > T)
      throw std::runtime_error(rows_->where(i) + ": " + std::to_string(n) + " tokens, more than max_sequence_length " +
                               std::to_string(T) + " (with NSP rows are not cut)");
    std::vector<int64_t> token_ids(static_cast<size_t>(n)), row_labels(static_cast<size_t>(T), o_.labels_pad_id);
    for (int64_t t = 0; t < n; ++t) {
      std::string& token = s.tokens[static_cast<size_t>(t)];
      if (o_.do_lower) token = lower_ascii(token);
      token_ids[static_cast<size_t>(t)] = vocab_.id(token, oov_id_);
      if (vocab_size && token_ids[static_cast<size_t>(t)] >= *vocab_size)
        throw std::runtime_error(rows_->where(i) + ": token '" + token + "' has id " +
                                 std::to_string(token_ids[static_cast<size_t>(t)]) +
                                 " in vocab_file, not below the "
                                 "model's vocab_size " +
                                 std::to_string(*vocab_size));
    }
    // modelzoo's create_masked_lm_predictions, drawn from (seed, epoch, row).
    SplitMix64 rng{SplitMix64::mix(static_cast<uint64_t>(o_.shuffle_seed) * 0x9E3779B97F4A7C15ull ^
                                   SplitMix64::mix(static_cast<uint64_t>(epoch) << 32 ^ static_cast<uint64_t>(i)))};
    const int64_t to_predict =
        std::min<int64_t>(P, std::max<int64_t>(1, std::llrint(static_cast<double>(n) * o_.masked_lm_prob)));
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) order[static_cast<size_t>(t)] = t;
    for (int64_t t = n - 1; t > 0; --t)
      std::swap(order[static_cast<size_t>(t)], order[rng.below(static_cast<uint64_t>(t + 1))]);
    std::vector<int64_t> masked;
    while (static_cast<int64_t>(masked.size()) < to_predict && !order.empty()) {
      const int64_t t = order.front();
      const std::string& token = s.tokens[static_cast<size_t>(t)];
      if (excluded_tokens_.count(token)) {
        order.erase(order.begin());
        continue;
      }
      const auto [first, end] = o_.mask_whole_word ? whole_word_span(s.tokens, t) : std::make_pair(t, t + 1);
      for (int64_t k = first; k < end; ++k) order.erase(std::remove(order.begin(), order.end(), k), order.end());
      if (static_cast<int64_t>(masked.size()) + (end - first) > P) continue;
      for (int64_t k = first; k < end; ++k) {
        masked.push_back(k);
        row_labels[static_cast<size_t>(k)] = token_ids[static_cast<size_t>(k)];
      }
    }
    std::vector<int64_t> row_ids(token_ids);
    for (int64_t k : masked) {
      const double r = rng.uniform();
      if (r < 0.8) row_ids[static_cast<size_t>(k)] = mask_id_;
      else if (r < 0.9) row_ids[static_cast<size_t>(k)] = replacement_pool_[rng.below(replacement_pool_.size())];
    }
    for (int64_t t = 0; t < n; ++t) ids_at[b][t] = row_ids[static_cast<size_t>(t)], attention_at[b][t] = 1;
    std::sort(masked.begin(), masked.end());
    if (o_.gather_mlm_labels) {
      for (size_t k = 0; k < masked.size(); ++k) {
        positions_at[b][static_cast<int64_t>(k)] = masked[k];
        labels_at[b][static_cast<int64_t>(k)] = row_labels[static_cast<size_t>(masked[k])];
        mask_at[b][static_cast<int64_t>(k)] = 1;
      }
    } else {
      for (int64_t t = 0; t < T; ++t) labels_at[b][t] = row_labels[static_cast<size_t>(t)];
      for (int64_t k : masked) mask_at[b][k] = 1;
    }
    if (!o_.disable_nsp) {
      for (size_t t = 0; t < s.segments.size() && static_cast<int64_t>(t) < T; ++t)
        segments_at[b][static_cast<int64_t>(t)] = s.segments[t];
      nsp_at[b] = s.is_random_next;
    }
  }
  Features f = {
      {"input_ids", input_ids}, {"attention_mask", attention}, {"labels", labels}, {"masked_lm_mask", mlm_mask}};
  if (o_.gather_mlm_labels) f["masked_lm_positions"] = positions;
  if (!o_.disable_nsp) f["token_type_ids"] = segments, f["next_sentence_label"] = nsp;
  return f;
}

namespace {
std::vector<std::string> produced(const BertCsvOptions& o) {
  std::vector<std::string> p = {"input_ids", "attention_mask", "labels", "masked_lm_mask"};
  if (o.gather_mlm_labels) p.push_back("masked_lm_positions");
  if (!o.disable_nsp) p.insert(p.end(), {"token_type_ids", "next_sentence_label"});
  return p;
}

}  // namespace

DataProcessor bert_csv_processor() {
  return make_data_processor<BertCsvOptions>(
      "BertCSVDynamicMaskDataProcessor",
      "BERT masked-LM (and NSP) samples from modelzoo's pre-training CSV files (meta.dat, `tokens`, `segment_ids`, "
      "`is_random_next`), masked anew each epoch.",
      {"input_ids", "attention_mask", "labels", "masked_lm_mask", "masked_lm_positions", "token_type_ids",
       "next_sentence_label"},
      open_csv<BertCsvSource, BertCsvOptions>, produced);
}

const config::Schema<BertCsvStaticOptions>& BertCsvStaticOptions::schema() {
  using O = BertCsvStaticOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (BertCSVDataProcessor)",
                         "BERT samples masked ahead of time, one per row of modelzoo's pre-training CSV files.");
    add_loader_fields(sc)
        .field("disable_nsp", &O::disable_nsp, "Masked LM only: no token_type_ids or next_sentence_label.")
        .field("dynamic_mlm_scale", &O::dynamic_mlm_scale, "Not in zoo: scale the loss by each batch's masked count.")
        .field("shuffle_buffer", &O::shuffle_buffer,
               "modelzoo shuffles through a buffer of this many rows; zoo permutes all rows each epoch, so the "
               "value changes nothing.",
               config::if_set(config::positive<int64_t>()))
        .ignored({"vocab_size", "vocab_file", "whole_word_masking", "max_predictions_per_seq", "do_lower",
                  "masked_lm_prob", "max_sequence_length", "max_position_embeddings", "mask_whole_word"},
                 "deprecated in modelzoo: the rows were masked when the CSV files were written")
        .ignored({"buckets"}, "zoo batches rows in order without length buckets; the samples are the same")
        .validate([](const O& o, const auto& fail) {
          if (o.dynamic_mlm_scale) fail("dynamic_mlm_scale", "is not in zoo (the loss uses mlm_loss_weight)");
        });
    return sc;
  }();
  return s;
}

BertCsvStaticSource::BertCsvStaticSource(const BertCsvStaticOptions& o) : o_(o) {
  // The NSP columns are read where the files have them, as modelzoo's
  // processor does (ESM-2's classification rows have none, and their files
  // leave disable_nsp unset); a model that needs them says so.
  rows_ =
      std::make_unique<CsvTable>(o.data_dir.items, std::vector<std::string>{"input_ids", "attention_mask", "labels"});
}

Features BertCsvStaticSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  // Each feature's rows, stacked; every row of a feature must have one length.
  std::map<std::string, std::vector<std::vector<int64_t>>> columns;
  std::vector<std::string> names = {"input_ids", "attention_mask", "labels", "masked_lm_positions",
                                    "masked_lm_weights"};
  if (!o_.disable_nsp) names.insert(names.end(), {"token_type_ids", "next_sentence_label"});
  for (int64_t i : ids) {
    const CsvTable::Row row = rows_->row(i);
    for (const auto& name : names) {
      if (!rows_->has_column(i, name)) continue;
      try {
        columns[name].push_back(parse_python_int_list(row[name]));
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error(rows_->where(i) + ", column " + name + ": " + e.what());
      }
      const auto& rows = columns[name];
      if (rows.back().size() != rows.front().size())
        throw std::runtime_error(rows_->where(i) + ": " + name + " has " + std::to_string(rows.back().size()) +
                                 " values where the batch's first row has " + std::to_string(rows.front().size()));
    }
    if (vocab_size)
      for (int64_t id : columns["input_ids"].back())
        if (id < 0 || id >= *vocab_size)
          throw std::runtime_error(rows_->where(i) + ": input id " + std::to_string(id) + " is not below vocab_size " +
                                   std::to_string(*vocab_size));
  }
  Features f;
  for (const auto& [name, rows] : columns) {
    if (rows.size() != ids.size()) throw std::runtime_error(describe() + ": some rows have no " + name + " column");
    torch::Tensor t =
        torch::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.front().size())}, torch::kLong);
    for (size_t r = 0; r < rows.size(); ++r)
      std::copy(rows[r].begin(), rows[r].end(), t.data_ptr<int64_t>() + r * rows.front().size());
    f[name == "masked_lm_weights" ? "masked_lm_mask" : name] = name == "next_sentence_label" ? t.reshape({-1}) : t;
  }
  return f;
}

DataProcessor bert_csv_static_processor() {
  return make_data_processor<BertCsvStaticOptions>(
      "BertCSVDataProcessor",
      "BERT samples masked ahead of time: modelzoo's CSV rows of input_ids, attention_mask, labels, "
      "masked_lm_positions, masked_lm_weights (and with NSP token_type_ids, next_sentence_label); also rows of "
      "input_ids, attention_mask and one label, for ESM-2 classification.",
      {"input_ids", "attention_mask", "labels", "masked_lm_mask", "masked_lm_positions", "token_type_ids",
       "next_sentence_label"},
      open_csv<BertCsvStaticSource, BertCsvStaticOptions>, [](const BertCsvStaticOptions& o) {
        std::vector<std::string> p = {"input_ids", "attention_mask", "labels", "masked_lm_mask", "masked_lm_positions"};
        if (!o.disable_nsp) p.insert(p.end(), {"token_type_ids", "next_sentence_label"});
        return p;
      });
}

}  // namespace zoo::data
