// Implementation of data/processors/synthetic.h.
#include "data/processors/synthetic.h"

#include "data/splitmix.h"

namespace zoo::data {

const config::Schema<SyntheticOptions>& SyntheticOptions::schema() {
  using O = SyntheticOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (SyntheticDataProcessor)",
                         "Random token samples made on the fly (zoo's own; no data files).");
    add_loader_fields(sc)
        .field("vocab_size", &O::vocab_size, "Token ids are drawn from [0, vocab_size).", config::positive<int64_t>())
        .field("max_sequence_length", &O::max_sequence_length, "Tokens per sample.", config::positive<int64_t>())
        .field("num_examples", &O::num_examples, "Samples per epoch.", config::positive<int64_t>())
        .field("seed", &O::seed, "Seed of the token values (shuffle_seed orders the samples).")
        .validate([](const O& o, const auto& fail) {
          if (o.vocab_size <= 0) fail("vocab_size", "required: the number of token ids to draw from");
          if (o.max_sequence_length <= 0) fail("max_sequence_length", "required: tokens per sample");
          if (o.num_examples < o.batch_size)
            fail("num_examples", "fewer than batch_size (" + std::to_string(o.batch_size) + ")");
        });
    return sc;
  }();
  return s;
}

SyntheticSource::SyntheticSource(const SyntheticOptions& o)
    : vocab_size_(o.vocab_size),
      msl_(o.max_sequence_length),
      num_examples_(o.num_examples),
      seed_(static_cast<uint64_t>(o.seed)) {}

int32_t SyntheticSource::token(int64_t i, int64_t t) const {
  // splitmix64 of the token's position: independent values, random access.
  const uint64_t z =
      SplitMix64::mix(seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i) * static_cast<uint64_t>(msl_ + 1) +
                      static_cast<uint64_t>(t) + 0x9E3779B97F4A7C15ull);
  return static_cast<int32_t>(z % static_cast<uint64_t>(vocab_size_));
}

void SyntheticSource::read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const {
  int32_t previous = token(i, 0);
  for (int64_t t = 0; t < msl_; ++t) {
    const int32_t next = token(i, t + 1);
    input_ids[t] = previous;
    labels[t] = next;
    mask[t] = 1;
    previous = next;
  }
}

DataProcessor synthetic_processor() {
  return make_data_processor<SyntheticOptions>(
      "SyntheticDataProcessor", "Random token samples made on the fly, for benchmarks (zoo's own).",
      {"input_ids", "attention_mask", "labels"}, [](const SyntheticOptions& o, const config::Origin&) {
        return std::make_unique<MapStyleLoader>(std::make_shared<SyntheticSource>(o), o);
      });
}

}  // namespace zoo::data
