// Implementation of data/transforms.h.
#include "data/transforms.h"

namespace zoo::data {

const config::Schema<DataTransformSpec>& DataTransformSpec::schema() {
  using O = DataTransformSpec;
  static const config::Schema<O> s =
      config::Schema<O>("data_transforms entry", "A transform of each LM batch (modelzoo's data_transforms).")
          .field("name", &O::name, "add_sink_tokens (modelzoo's add_memory_tokens and PoSE are not in zoo).",
                 config::one_of({"add_sink_tokens"}))
          .field("sink_token_id", &O::sink_token_id, "Id of the sink tokens.", config::non_negative<int64_t>())
          .field("num_sink_tokens", &O::num_sink_tokens, "Sink tokens per sample.", config::positive<int64_t>())
          .field("sink_token_start_pos", &O::sink_token_start_pos, "Where they go in the sample.",
                 config::non_negative<int64_t>())
          .field("truncate_to_original_length", &O::truncate_to_original_length,
                 "Cut each sample back to its length before the sinks.")
          .field("use_vsl", &O::use_vsl, "Variable sequence length: not with add_sink_tokens (as modelzoo).")
          .validate([](const O& o, const auto& fail) {
            if (o.use_vsl) fail("use_vsl", "add_sink_tokens does not take variable-length sequences");
          });
  return s;
}

namespace {

// Sinks in the middle of (B, T) input_ids / labels / attention_mask.
Features add_sink_tokens(Features f, const DataTransformSpec& t) {
  const torch::Tensor& ids = f.at("input_ids");
  const int64_t B = ids.size(0), T = ids.size(1), at = t.sink_token_start_pos;
  if (at > T)
    throw std::runtime_error("data_transforms: sink_token_start_pos " + std::to_string(at) +
                             " is past the sequence length " + std::to_string(T));
  auto insert = [&](const torch::Tensor& values, int64_t fill) {
    torch::Tensor out =
        torch::cat({values.narrow(1, 0, at), torch::full({B, t.num_sink_tokens}, fill, values.options()),
                    values.narrow(1, at, T - at)},
                   1);
    return t.truncate_to_original_length ? out.narrow(1, 0, T).contiguous() : out;
  };
  f["input_ids"] = insert(ids, t.sink_token_id);
  f["labels"] = insert(f.at("labels"), t.sink_token_id);
  f["attention_mask"] = insert(f.at("attention_mask"), 0);
  return f;
}

class TransformingLoader : public DataLoader {
 public:
  TransformingLoader(std::unique_ptr<DataLoader> inner, std::vector<DataTransformSpec> transforms)
      : inner_(std::move(inner)), transforms_(std::move(transforms)) {}
  Features next() override {
    Features f = inner_->next();
    for (const auto& t : transforms_) f = add_sink_tokens(std::move(f), t);
    return f;
  }
  int64_t batches_per_epoch() const override { return inner_->batches_per_epoch(); }
  int64_t batch_size() const override { return inner_->batch_size(); }
  int64_t micro_batches() const override { return inner_->micro_batches(); }
  void seek(int64_t samples_streamed) override { inner_->seek(samples_streamed); }
  Position position() const override { return inner_->position(); }
  bool same_stream_at_any_world_size() const override { return inner_->same_stream_at_any_world_size(); }
  void check_token_ids(int64_t vocab_size) override { inner_->check_token_ids(vocab_size); }
  std::optional<int64_t> sequence_length() const override {
    std::optional<int64_t> T = inner_->sequence_length();
    if (T)
      for (const auto& t : transforms_)
        if (!t.truncate_to_original_length) *T += t.num_sink_tokens;
    return T;
  }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::unique_ptr<DataLoader> inner_;
  std::vector<DataTransformSpec> transforms_;
};

}  // namespace

std::unique_ptr<DataLoader> with_transforms(std::unique_ptr<DataLoader> loader,
                                            const std::vector<DataTransformSpec>& transforms) {
  if (transforms.empty()) return loader;
  return std::make_unique<TransformingLoader>(std::move(loader), transforms);
}

}  // namespace zoo::data
