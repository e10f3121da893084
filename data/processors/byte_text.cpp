// Implementation of data/processors/byte_text.h.
#include "data/processors/byte_text.h"

#include <fstream>
#include <sstream>

namespace zoo::data {

const config::Schema<ByteTextOptions>& ByteTextOptions::schema() {
  using O = ByteTextOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (ByteTextDataProcessor)",
                         "Byte-level language modelling over plain *.txt files.");
    add_loader_fields(sc).field("max_sequence_length", &O::max_sequence_length, "Tokens per sample.",
                                config::positive<int64_t>());
    return sc;
  }();
  return s;
}

ByteTextSource::ByteTextSource(std::vector<std::string> files, int64_t sequence_length, std::string description)
    : seq_len_(sequence_length), description_(std::move(description)) {
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes_ += ss.str();
  }
}

int64_t ByteTextSource::num_samples() const {
  return bytes_.empty() ? 0 : (static_cast<int64_t>(bytes_.size()) - 1) / seq_len_;
}

void ByteTextSource::read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes_.data()) + i * seq_len_;
  for (int64_t t = 0; t < seq_len_; ++t) {
    input_ids[t] = p[t];
    labels[t] = p[t + 1];
    mask[t] = 1;
  }
}

DataProcessor byte_text_processor() {
  return make_data_processor<ByteTextOptions>(
      "ByteTextDataProcessor", "Plain text files, one token per byte (vocab_size >= 256).",
      {"input_ids", "attention_mask", "labels"}, [](const ByteTextOptions& o, const config::Origin& at) {
        std::vector<std::string> files;
        if (o.data_dir.items.empty()) at.fail("data_dir", "required: directory of *.txt files");
        for (const auto& dir : o.data_dir.items) {
          for (const auto& f : list_files(require_directory(dir, at), ".txt")) files.push_back(f);
        }
        std::string where;
        for (const auto& d : o.data_dir.items) where += (where.empty() ? "" : ", ") + d;
        if (files.empty()) at.fail("data_dir", "no *.txt files in " + where);
        auto source = std::make_shared<ByteTextSource>(files, o.max_sequence_length,
                                                       at.context().key_path("data_dir") + " " + where);
        if (source->num_samples() < o.batch_size)
          at.fail("data_dir", "only " + std::to_string(source->num_samples()) + " sample(s) of " +
                                  std::to_string(o.max_sequence_length) + " tokens in " + where +
                                  ", fewer than batch_size " + std::to_string(o.batch_size));
        return std::make_unique<MapStyleLoader>(source, o);
      });
}

}  // namespace zoo::data
