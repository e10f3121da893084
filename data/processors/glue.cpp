// Implementation of data/processors/glue.h.
#include "data/processors/glue.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace zoo::data {

const config::Schema<GlueOptions>& GlueOptions::schema() {
  using O = GlueOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (SST2DataProcessor, MNLIDataProcessor)",
                         "GLUE TSV files tokenized with a WordPiece vocab_file.");
    add_loader_fields(sc)
        .field("is_training", &O::is_training,
               "Read the train split (true) or the dev split(s) (null: true in train_input / train_dataloader, "
               "as modelzoo's run.py sets it).")
        .field("vocab_file", &O::vocab_file, "WordPiece vocabulary, one token per line (line k is id k).")
        .field("do_lower", &O::do_lower, "Lower-case the text and the vocabulary (uncased BERT).")
        .field("max_sequence_length", &O::max_sequence_length, "Tokens per sample, [CLS] and [SEP]s included.",
               config::positive<int64_t>())
        .field("labels_pad_id", &O::labels_pad_id, "Unused (each sample has one label); accepted as modelzoo does.")
        .field("input_pad_id", &O::input_pad_id, "input_ids of padding.")
        .field("attn_mask_pad_id", &O::attn_mask_pad_id, "attention_mask of padding.")
        .validate([](const O& o, const auto& fail) {
          if (o.vocab_file.empty()) fail("vocab_file", "required: the WordPiece vocabulary");
          if (o.max_sequence_length < 3) fail("max_sequence_length", "required: at least 3 ([CLS] a [SEP])");
        });
    return sc;
  }();
  return s;
}

std::vector<std::vector<std::string>> read_tsv(const std::string& path, const std::vector<std::string>& columns) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  auto split = [](const std::string& line) {
    std::vector<std::string> fields;
    std::string field;
    std::istringstream s(line);
    while (std::getline(s, field, '\t')) fields.push_back(field);
    if (!line.empty() && line.back() == '\t') fields.emplace_back();
    for (auto& f : fields)
      if (!f.empty() && f.back() == '\r') f.pop_back();
    return fields;
  };
  std::string line;
  if (!std::getline(in, line)) throw std::runtime_error(path + ": empty, expected a header row");
  const std::vector<std::string> header = split(line);
  std::vector<size_t> at;
  for (const auto& c : columns) {
    const auto it = std::find(header.begin(), header.end(), c);
    if (it == header.end()) throw std::runtime_error(path + ": no '" + c + "' column in the header");
    at.push_back(static_cast<size_t>(it - header.begin()));
  }
  std::vector<std::vector<std::string>> rows;
  for (int64_t row = 1; std::getline(in, line); ++row) {
    if (line.empty()) continue;
    const std::vector<std::string> fields = split(line);
    std::vector<std::string> picked;
    for (size_t k : at) {
      if (k >= fields.size())
        throw std::runtime_error(path + ", row " + std::to_string(row) + ": " + std::to_string(fields.size()) +
                                 " fields, no '" + header[k] + "'");
      picked.push_back(fields[k]);
    }
    rows.push_back(std::move(picked));
  }
  return rows;
}

GlueSource::GlueSource(std::vector<Row> rows, std::shared_ptr<const text::WordPieceTokenizer> tokenizer,
                       const GlueOptions& o, std::string describe)
    : rows_(std::move(rows)), tokenizer_(std::move(tokenizer)), o_(o), describe_(std::move(describe)) {}

Features GlueSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  const int64_t B = static_cast<int64_t>(ids.size()), T = o_.max_sequence_length;
  torch::Tensor input_ids = torch::full({B, T}, o_.input_pad_id, torch::kLong),
                attention = torch::full({B, T}, o_.attn_mask_pad_id, torch::kLong),
                segments = torch::zeros({B, T}, torch::kLong), labels = torch::zeros({B}, torch::kLong),
                matched = torch::zeros({B}, torch::kLong);
  auto ids_at = input_ids.accessor<int64_t, 2>(), attention_at = attention.accessor<int64_t, 2>(),
       segments_at = segments.accessor<int64_t, 2>();
  auto labels_at = labels.accessor<int64_t, 1>(), matched_at = matched.accessor<int64_t, 1>();
  const int64_t cls = tokenizer_->id("[CLS]"), sep = tokenizer_->id("[SEP]");
  for (int64_t r = 0; r < B; ++r) {
    const Row& row = rows_[static_cast<size_t>(ids[static_cast<size_t>(r)])];
    std::vector<std::string> a = tokenizer_->tokenize(row.a), b;
    if (!row.b.empty()) {
      b = tokenizer_->tokenize(row.b);
      while (static_cast<int64_t>(a.size() + b.size()) > T - 3) (a.size() > b.size() ? a : b).pop_back();
    } else if (static_cast<int64_t>(a.size()) > T - 2) {
      a.resize(static_cast<size_t>(T - 2));
    }
    std::vector<int64_t> seq = {cls};
    for (const auto& t : a) seq.push_back(tokenizer_->id(t));
    seq.push_back(sep);
    const size_t second = seq.size();
    if (!row.b.empty()) {
      for (const auto& t : b) seq.push_back(tokenizer_->id(t));
      seq.push_back(sep);
    }
    for (size_t t = 0; t < seq.size(); ++t) {
      if (vocab_size && seq[t] >= *vocab_size)
        throw std::runtime_error(describe_ + ": token id " + std::to_string(seq[t]) +
                                 " of vocab_file is not below the "
                                 "model's vocab_size " +
                                 std::to_string(*vocab_size));
      ids_at[r][static_cast<int64_t>(t)] = seq[t];
      attention_at[r][static_cast<int64_t>(t)] = 1;
      if (t >= second) segments_at[r][static_cast<int64_t>(t)] = 1;  // b and its [SEP], as BERT's paper
    }
    labels_at[r] = row.label;
    matched_at[r] = row.matched;
  }
  Features f = {
      {"input_ids", input_ids}, {"attention_mask", attention}, {"token_type_ids", segments}, {"labels", labels}};
  if (!rows_.empty() && rows_.front().matched >= 0) f["is_matched"] = matched, f["is_mismatched"] = 1 - matched;
  return f;
}

namespace {

std::shared_ptr<const text::WordPieceTokenizer> open_tokenizer(const GlueOptions& o, const config::Origin& at) {
  try {
    return std::make_shared<const text::WordPieceTokenizer>(o.vocab_file, o.do_lower);
  } catch (const std::exception& e) {
    at.fail("vocab_file", e.what());
  }
}

std::unique_ptr<DataLoader> loader_of(std::vector<GlueSource::Row> rows, const GlueOptions& o, const config::Origin& at,
                                      const std::string& dir) {
  if (static_cast<int64_t>(rows.size()) < o.batch_size)
    at.fail("data_dir", dir + ": " + std::to_string(rows.size()) + " row(s), fewer than batch_size " +
                            std::to_string(o.batch_size));
  return std::make_unique<MapStyleLoader>(std::make_shared<GlueSource>(std::move(rows), open_tokenizer(o, at), o, dir),
                                          o);
}

// modelzoo's run.py sets is_training by the section: train_input / train_dataloader read the train split.
bool training(const GlueOptions& o, const config::Origin& at) {
  const std::string& section = at.context().path;
  return o.is_training.value_or(section.find("train_input") != std::string::npos ||
                                section.find("train_dataloader") != std::string::npos);
}

std::string only_dir(const GlueOptions& o, const config::Origin& at) {
  if (o.data_dir.items.size() != 1) at.fail("data_dir", "expected one directory holding the task's TSV files");
  return require_directory(o.data_dir.items.front(), at);
}

std::unique_ptr<DataLoader> open_sst2(const GlueOptions& o, const config::Origin& at) {
  const std::string dir = only_dir(o, at);
  const std::string file = (std::filesystem::path(dir) / (training(o, at) ? "train.tsv" : "dev.tsv")).string();
  std::vector<GlueSource::Row> rows;
  try {
    int64_t n = 0;
    for (const auto& r : read_tsv(file, {"sentence", "label"})) {
      ++n;
      size_t used = 0;
      const int64_t label = std::stoll(r[1], &used);
      if (used != r[1].size() || (label != 0 && label != 1))
        throw std::runtime_error(file + ", row " + std::to_string(n) + ": label '" + r[1] + "', expected 0 or 1");
      rows.push_back({r[0], "", label, -1});
    }
  } catch (const std::invalid_argument&) {
    at.fail("data_dir", file + ": a label is not a number");
  } catch (const config::ConfigError&) {
    throw;  // already names the file and key
  } catch (const std::runtime_error& e) {
    at.fail("data_dir", e.what());
  }
  return loader_of(std::move(rows), o, at, dir);
}

std::unique_ptr<DataLoader> open_mnli(const GlueOptions& o, const config::Origin& at) {
  static const std::map<std::string, int64_t> kLabels = {{"entailment", 0}, {"neutral", 1}, {"contradiction", 2}};
  const std::string dir = only_dir(o, at);
  std::vector<GlueSource::Row> rows;
  const std::vector<std::string> splits =
      training(o, at) ? std::vector<std::string>{"train"} : std::vector<std::string>{"dev_matched", "dev_mismatched"};
  try {
    for (const auto& split : splits) {
      const std::string file = (std::filesystem::path(dir) / (split + ".tsv")).string();
      int64_t n = 0;
      for (const auto& r : read_tsv(file, {"sentence1", "sentence2", "gold_label"})) {
        ++n;
        const auto label = kLabels.find(r[2]);
        if (label == kLabels.end())
          throw std::runtime_error(file + ", row " + std::to_string(n) + ": gold_label '" + r[2] +
                                   "', expected entailment, neutral or contradiction");
        rows.push_back({r[0], r[1], label->second, split == "train" ? -1 : (split == "dev_matched" ? 1 : 0)});
      }
    }
  } catch (const config::ConfigError&) {
    throw;  // already names the file and key
  } catch (const std::runtime_error& e) {
    at.fail("data_dir", e.what());
  }
  return loader_of(std::move(rows), o, at, dir);
}

}  // namespace

DataProcessor sst2_processor() {
  return make_data_processor<GlueOptions>(
      "SST2DataProcessor", "GLUE SST-2 sentiment (train.tsv / dev.tsv: sentence, label), WordPiece-tokenized.",
      {"input_ids", "attention_mask", "token_type_ids", "labels"}, open_sst2);
}

DataProcessor mnli_processor() {
  return make_data_processor<GlueOptions>(
      "MNLIDataProcessor",
      "GLUE MNLI entailment (train.tsv, or dev_matched.tsv + dev_mismatched.tsv: sentence1, sentence2, gold_label), "
      "WordPiece-tokenized; dev batches also hold is_matched / is_mismatched.",
      {"input_ids", "attention_mask", "token_type_ids", "labels", "is_matched", "is_mismatched"}, open_mnli,
      [](const GlueOptions& o) {
        std::vector<std::string> p = {"input_ids", "attention_mask", "token_type_ids", "labels"};
        if (!o.is_training.value_or(true)) p.insert(p.end(), {"is_matched", "is_mismatched"});
        return p;
      });
}

}  // namespace zoo::data
