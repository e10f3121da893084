// Implementation of data/processors/alphabet.h.
#include "data/processors/alphabet.h"

#include "data/splitmix.h"

namespace zoo::data {

const config::Schema<AlphabetOptions>& AlphabetOptions::schema() {
  using O = AlphabetOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (AlphabetDataProcessor)",
                         "Runs of consecutive letters (ids 0-25), modelzoo's layers-API tutorial task.");
    add_loader_fields(sc)
        .field("num_samples", &O::num_samples, "Samples per epoch.", config::positive<int64_t>())
        .field("seq_length", &O::seq_length, "Letters per input (each sample draws one more for its labels).",
               config::positive<int64_t>())
        .field("seed", &O::seed, "Seed of each sample's first letter (shuffle_seed orders the samples).")
        .validate([](const O& o, const auto& fail) {
          if (o.num_samples <= 0) fail("num_samples", "required: samples per epoch");
          if (o.seq_length <= 0) fail("seq_length", "required: letters per input");
          if (o.seq_length + 1 > kAlphabetLetters)
            fail("seq_length", "expected at most " + std::to_string(kAlphabetLetters - 1) +
                                   ": a sample is seq_length + 1 consecutive letters of 26");
          if (o.num_samples < o.batch_size)
            fail("num_samples", "fewer than batch_size (" + std::to_string(o.batch_size) + ")");
        });
    return sc;
  }();
  return s;
}

AlphabetSource::AlphabetSource(const AlphabetOptions& o)
    : num_samples_(o.num_samples), seq_length_(o.seq_length), seed_(static_cast<uint64_t>(o.seed)) {}

int64_t AlphabetSource::start(int64_t i) const {
  const uint64_t starts = static_cast<uint64_t>(kAlphabetLetters - seq_length_);  // 0 .. 26 - seq_length - 1
  return static_cast<int64_t>(SplitMix64::mix((seed_ + 1) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i)) % starts);
}

void AlphabetSource::read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const {
  const int64_t s = start(i);
  for (int64_t t = 0; t < seq_length_; ++t) {
    input_ids[t] = static_cast<int32_t>(s + t);
    labels[t] = static_cast<int32_t>(s + t + 1);
    mask[t] = 1;
  }
}

DataProcessor alphabet_processor() {
  return make_data_processor<AlphabetOptions>(
      "AlphabetDataProcessor", "Runs of consecutive letters, the task of modelzoo's layers-API tutorial.",
      {"input_ids", "attention_mask", "labels"}, [](const AlphabetOptions& o, const config::Origin&) {
        return std::make_unique<MapStyleLoader>(std::make_shared<AlphabetSource>(o), o);
      });
}

}  // namespace zoo::data
