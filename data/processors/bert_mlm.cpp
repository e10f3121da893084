// Implementation of data/processors/bert_mlm.h.
#include "data/processors/bert_mlm.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "data/processors/gpt_hdf5.h"
#include "data/splitmix.h"

namespace zoo::data {

const config::Schema<BertMlmOptions>& BertMlmOptions::schema() {
  using O = BertMlmOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (BertMlmDataProcessor)",
                         "BERT masked-LM + next-sentence samples from tokenized HDF5 windows (zoo's own).");
    add_loader_fields(sc)
        .field("max_sequence_length", &O::max_sequence_length, "Tokens per sample, [CLS] and [SEP]s included.",
               config::positive<int64_t>())
        .field("max_predictions_per_seq", &O::max_predictions_per_seq, "Most masked positions per sample.",
               config::positive<int64_t>())
        .field("masked_lm_prob", &O::masked_lm_prob, "Share of the tokens that are masked.",
               config::in_range(0.0, 1.0, false))
        .field("disable_nsp", &O::disable_nsp, "No sentence pairs: one segment, next_sentence_label always 0.")
        .field("vocab_size", &O::vocab_size, "Random replacements are drawn from [0, vocab_size).",
               config::positive<int64_t>())
        .field("cls_id", &O::cls_id, "Id of [CLS].", config::non_negative<int64_t>())
        .field("sep_id", &O::sep_id, "Id of [SEP].", config::non_negative<int64_t>())
        .field("mask_id", &O::mask_id, "Id of [MASK].", config::non_negative<int64_t>())
        .field("pad_id", &O::pad_id, "Id of padding.", config::non_negative<int64_t>())
        .validate([](const O& o, const auto& fail) {
          if (o.max_sequence_length < 5) fail("max_sequence_length", "required: at least 5 ([CLS] a [SEP] b [SEP])");
          if (o.vocab_size <= 0) fail("vocab_size", "required: the model's vocabulary size");
          for (auto [key, id] : {std::pair<const char*, int64_t>{"cls_id", o.cls_id},
                                 {"sep_id", o.sep_id},
                                 {"mask_id", o.mask_id},
                                 {"pad_id", o.pad_id}})
            if (id >= o.vocab_size) fail(key, "must be below vocab_size (" + std::to_string(o.vocab_size) + ")");
        });
    return sc;
  }();
  return s;
}

BertMlmSource::BertMlmSource(std::shared_ptr<LmSampleSource> windows, const BertMlmOptions& o)
    : windows_(std::move(windows)), o_(o) {}

std::vector<int32_t> BertMlmSource::tokens(int64_t window) const {
  const int64_t T = windows_->sequence_length();
  std::vector<int32_t> ids(T), mask(T), labels(T);
  windows_->read(window, ids.data(), mask.data(), labels.data());
  std::vector<int32_t> out;
  for (int64_t t = 0; t < T && static_cast<int64_t>(out.size()) < o_.max_sequence_length - 3; ++t)
    if (mask[t]) out.push_back(ids[t]);
  return out;
}

Features BertMlmSource::read_batch(const std::vector<int64_t>& samples, std::optional<int64_t>) const {
  const int64_t B = static_cast<int64_t>(samples.size()), T = o_.max_sequence_length, P = o_.max_predictions_per_seq;
  torch::Tensor input_ids = torch::full({B, T}, o_.pad_id, torch::kLong),
                attention = torch::zeros({B, T}, torch::kLong), segments = torch::zeros({B, T}, torch::kLong),
                positions = torch::zeros({B, P}, torch::kLong), labels = torch::zeros({B, P}, torch::kLong),
                mlm_mask = torch::zeros({B, P}, torch::kLong), nsp = torch::zeros({B}, torch::kLong);
  // Element writes through accessors: Tensor indexing makes a view per element.
  auto ids_at = input_ids.accessor<int64_t, 2>(), attention_at = attention.accessor<int64_t, 2>(),
       segments_at = segments.accessor<int64_t, 2>(), positions_at = positions.accessor<int64_t, 2>(),
       labels_at = labels.accessor<int64_t, 2>(), mask_at = mlm_mask.accessor<int64_t, 2>();
  auto nsp_at = nsp.accessor<int64_t, 1>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = samples[b];
    SplitMix64 rng{static_cast<uint64_t>(o_.shuffle_seed) * 0xD1B54A32D192ED03ull ^ static_cast<uint64_t>(i)};
    std::vector<int32_t> a = tokens(i), second;
    if (a.empty()) throw std::runtime_error(windows_->locate(i) + ": no tokens (attention_mask is all 0)");
    bool not_next = false;
    if (!o_.disable_nsp && a.size() >= 2) {
      const size_t cut = 1 + rng.below(a.size() - 1);
      second.assign(a.begin() + static_cast<std::ptrdiff_t>(cut), a.end());
      a.resize(cut);
      if (num_samples() > 1 && rng.below(2) == 1) {
        int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(num_samples() - 1)));
        if (j >= i) ++j;  // any window but this one
        const std::vector<int32_t> other = tokens(j);
        const size_t take = std::min(second.size(), other.size());
        const size_t from = other.size() > take ? rng.below(other.size() - take + 1) : 0;
        second.assign(other.begin() + static_cast<std::ptrdiff_t>(from),
                      other.begin() + static_cast<std::ptrdiff_t>(from + take));
        not_next = true;
      }
    }
    // [CLS] A [SEP] (B [SEP]); remember which positions hold real tokens.
    std::vector<int64_t> seq = {o_.cls_id}, type = {0}, candidates;
    for (int32_t t : a) candidates.push_back(static_cast<int64_t>(seq.size())), seq.push_back(t), type.push_back(0);
    seq.push_back(o_.sep_id), type.push_back(0);
    if (!second.empty()) {
      for (int32_t t : second)
        candidates.push_back(static_cast<int64_t>(seq.size())), seq.push_back(t), type.push_back(1);
      seq.push_back(o_.sep_id), type.push_back(1);
    }
    const int64_t n = static_cast<int64_t>(candidates.size());
    const int64_t predictions =
        std::min<int64_t>({P, n, std::max<int64_t>(1, std::llround(o_.masked_lm_prob * static_cast<double>(n)))});
    for (int64_t k = 0; k < predictions; ++k)  // a random subset: the first `predictions` of a partial shuffle
      std::swap(candidates[k], candidates[k + static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - k)))]);
    std::sort(candidates.begin(), candidates.begin() + predictions);
    for (int64_t k = 0; k < predictions; ++k) {
      const int64_t pos = candidates[k];
      positions_at[b][k] = pos;
      labels_at[b][k] = seq[pos];
      mask_at[b][k] = 1;
      const double r = rng.uniform();
      if (r < 0.8) seq[pos] = o_.mask_id;
      else if (r < 0.9) seq[pos] = static_cast<int64_t>(rng.below(static_cast<uint64_t>(o_.vocab_size)));
    }
    for (size_t t = 0; t < seq.size(); ++t) {
      ids_at[b][static_cast<int64_t>(t)] = seq[t];
      attention_at[b][static_cast<int64_t>(t)] = 1;
      segments_at[b][static_cast<int64_t>(t)] = type[t];
    }
    nsp_at[b] = not_next ? 1 : 0;
  }
  return {{"input_ids", input_ids},     {"attention_mask", attention},
          {"token_type_ids", segments}, {"masked_lm_positions", positions},
          {"labels", labels},           {"masked_lm_mask", mlm_mask},
          {"next_sentence_label", nsp}};
}

namespace {
std::unique_ptr<DataLoader> open_bert(const BertMlmOptions& o, const config::Origin& at) {
  const std::vector<std::string> files = sorted_hdf5_files(o.data_dir, at);
  std::shared_ptr<Hdf5SampleSource> windows;
  try {
    // Token streams are cut into windows that fit with [CLS] and two [SEP]s.
    windows = std::make_shared<Hdf5SampleSource>(files, std::nullopt, o.max_sequence_length - 3);
  } catch (const std::exception& e) {
    at.fail("data_dir", e.what());
  }
  if (windows->num_samples() < o.batch_size)
    at.fail("data_dir", std::to_string(windows->num_samples()) + " window(s), fewer than batch_size " +
                            std::to_string(o.batch_size));
  return std::make_unique<MapStyleLoader>(std::make_shared<BertMlmSource>(windows, o), o);
}
}  // namespace

DataProcessor bert_mlm_processor() {
  return make_data_processor<BertMlmOptions>(
      "BertMlmDataProcessor",
      "BERT masked-LM and next-sentence samples from tokenized HDF5 data (zoo's own; masks fixed per sample and "
      "shuffle_seed).",
      {"input_ids", "attention_mask", "token_type_ids", "masked_lm_positions", "labels", "masked_lm_mask",
       "next_sentence_label"},
      open_bert);
}

}  // namespace zoo::data
