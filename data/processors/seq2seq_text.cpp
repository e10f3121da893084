// Implementation of data/processors/seq2seq_text.h.
#include "data/processors/seq2seq_text.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/csv_loader.h"

namespace zoo::data {

const config::Schema<Seq2SeqTextOptions>& Seq2SeqTextOptions::schema() {
  using O = Seq2SeqTextOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input / eval_input (T5DynamicDataProcessor, TransformerDynamicDataProcessor)",
                         "Text files of space-separated tokens listed in meta.dat, looked up in src_vocab_file.");
    add_loader_fields(sc)
        .field("src_vocab_file", &O::src_vocab_file, "Vocabulary, one token per line (line k is id k).")
        .field("src_data_dir", &O::src_data_dir,
               "Directory (or list) holding meta.dat: lines \"file lines\" (T5) or \"source_file target_file lines\" "
               "(Transformer).")
        .field("src_max_sequence_length", &O::src_max_sequence_length, "Source tokens per sample (padded).",
               config::positive<int64_t>())
        .field("tgt_max_sequence_length", &O::tgt_max_sequence_length, "Target tokens per sample (padded).",
               config::positive<int64_t>())
        .field("extra_ids", &O::extra_ids, "Sentinel ids after the vocabulary file's tokens.",
               config::non_negative<int64_t>())
        .field("do_lower", &O::do_lower, "Lower-case tokens and the vocabulary.")
        .field("dynamic_loss_weight", &O::dynamic_loss_weight,
               "Also yield loss_weight = batch_size / target tokens of the batch (mlm_loss_scaling "
               "precomputed_num_masked; zoo's T5 computes it itself in training when absent).")
        .field("oov_token", &O::oov_token, "Token of words not in the vocabulary.")
        .field("sos_token", &O::sos_token, "Token that starts each decoder input.")
        .field("eos_token", &O::eos_token, "Token that ends each target.")
        .field("pad_token", &O::pad_token, "Token whose id pads inputs and labels (unless the pad ids are set).")
        .field("labels_pad_id", &O::labels_pad_id, "Padding of labels (null: pad_token's id).",
               config::if_set(config::non_negative<int64_t>()))
        .field("input_pad_id", &O::input_pad_id, "Padding of input_ids and decoder_input_ids (null: pad_token's id).",
               config::if_set(config::non_negative<int64_t>()))
        .field("shuffle_buffer", &O::shuffle_buffer,
               "modelzoo's streaming shuffle buffer; zoo shuffles every sample of the epoch instead.",
               config::if_set(config::positive<int64_t>()))
        .ignored({"tgt_vocab_file", "tgt_data_dir"},
                 "modelzoo reads the target files meta.dat names and looks both sides up in src_vocab_file")
        .ignored({"mixed_precision"}, "the model's precision keys decide it")
        .hardware_only({"buckets"}, "sequence-length bucketing for Cerebras' variable tensor shapes")
        .validate([](const O& o, const auto& fail) {
          if (!o.data_dir.items.empty()) fail("data_dir", "not read by this processor: give src_data_dir");
          if (o.src_data_dir.items.empty()) fail("src_data_dir", "required: the directory holding meta.dat");
          if (o.src_vocab_file.empty()) fail("src_vocab_file", "required: the vocabulary file");
          if (o.src_max_sequence_length <= 0) fail("src_max_sequence_length", "required");
          if (o.tgt_max_sequence_length <= 0) fail("tgt_max_sequence_length", "required");
        });
    return sc;
  }();
  return s;
}

namespace {

std::vector<std::string> split_tokens(const std::string& line, bool do_lower) {
  std::vector<std::string> tokens;
  std::istringstream in(line);
  for (std::string t; in >> t;) tokens.push_back(do_lower ? lower_ascii(t) : t);
  return tokens;
}

// Byte ranges [begin, end) of the whitespace-separated tokens of `line`.
std::vector<std::pair<int64_t, int64_t>> token_bytes(const std::string& line) {
  std::vector<std::pair<int64_t, int64_t>> tokens;
  bool in_token = false;
  for (int64_t i = 0; i < static_cast<int64_t>(line.size()); ++i) {
    const char c = line[static_cast<size_t>(i)];
    const bool space = c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
    if (!space && !in_token) tokens.emplace_back(i, i);
    if (!space) tokens.back().second = i + 1;
    in_token = !space;
  }
  return tokens;
}

int64_t count_tokens(const std::string& line) { return static_cast<int64_t>(token_bytes(line).size()); }

// Python's round(): halves to even.
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

// modelzoo's _random_segmentation: num_items split into num_segments
// non-empty runs, every choice of the num_segments - 1 cut points equally likely.
std::vector<int64_t> random_segmentation(int64_t num_items, int64_t num_segments, SplitMix64& rng) {
  std::vector<bool> cut(static_cast<size_t>(num_items - 1), false);
  std::fill(cut.begin(), cut.begin() + (num_segments - 1), true);
  for (int64_t i = static_cast<int64_t>(cut.size()) - 1; i > 0; --i) {  // Fisher-Yates
    const int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    const bool t = cut[static_cast<size_t>(i)];
    cut[static_cast<size_t>(i)] = cut[static_cast<size_t>(j)];
    cut[static_cast<size_t>(j)] = t;
  }
  std::vector<int64_t> lengths(static_cast<size_t>(num_segments), 0);
  int64_t segment = 0;
  for (int64_t i = 0; i < num_items; ++i) {
    if (i > 0 && cut[static_cast<size_t>(i - 1)]) ++segment;
    ++lengths[static_cast<size_t>(segment)];
  }
  return lengths;
}

// The files meta.dat lists in `dir`, each entry's fields.
std::vector<std::vector<std::string>> read_meta(const std::string& dir, size_t fields) {
  const std::string meta = (std::filesystem::path(dir) / "meta.dat").string();
  std::ifstream in(meta);
  if (!in) throw std::runtime_error(meta + ": missing (each data directory lists its files in meta.dat)");
  std::vector<std::vector<std::string>> entries;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    std::vector<std::string> f = split_tokens(line, false);
    if (f.empty()) continue;
    if (f.size() != fields)
      throw std::runtime_error(meta + ", line " + std::to_string(n) + ": expected " +
                               (fields == 2 ? "\"file lines\"" : "\"source_file target_file lines\"") + ", got \"" +
                               line + "\"");
    entries.push_back(f);
  }
  return entries;
}

int64_t line_count(const std::vector<std::string>& entry, const std::string& dir) {
  try {
    return std::stoll(entry.back());
  } catch (const std::exception&) {
    throw std::runtime_error(dir + "/meta.dat: \"" + entry.back() + "\" is not a number of lines");
  }
}

// A meta.dat path: relative to the data directory when the file is there (T5), else as given (modelzoo's
// Transformer meta.dat paths are the working directory's).
std::string resolve(const std::string& dir, const std::string& file) {
  const std::filesystem::path inside = std::filesystem::path(dir) / file;
  return std::filesystem::path(file).is_absolute() || !std::filesystem::exists(inside) ? file : inside.string();
}

// `bytes` bytes of `file` from byte `at` (a piece of a line).
std::string read_bytes(const std::string& file, int64_t at, int64_t bytes) {
  std::ifstream in(file, std::ios::binary);
  in.seekg(at);
  std::string text(static_cast<size_t>(bytes), '\0');
  if (!in || !in.read(text.data(), bytes))
    throw std::runtime_error(file + ": cannot read " + std::to_string(bytes) + " bytes at byte " + std::to_string(at));
  return text;
}

std::string read_line_at(const std::string& file, int64_t at) {
  std::ifstream in(file, std::ios::binary);
  in.seekg(at);
  std::string line;
  if (!in || !std::getline(in, line))
    throw std::runtime_error(file + ": cannot read the line at byte " + std::to_string(at));
  return line;
}

std::string describe_dirs(const config::PathList& dirs) {
  std::string s;
  for (const auto& d : dirs.items) s += (s.empty() ? "" : ", ") + d;
  return s;
}

// Pads the three sequences as modelzoo's pad_t5_input_features and adds them as row b.
void put_row(Features& f, int64_t b, const DenoisingSample& s) {
  auto put = [&](const char* name, const std::vector<int64_t>& ids, const char* mask_name) {
    torch::Tensor row = f.at(name)[b];
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(ids.size()), row.size(0));
    if (n > 0) row.narrow(0, 0, n).copy_(torch::tensor(std::vector<int64_t>(ids.begin(), ids.begin() + n)));
    if (mask_name) f.at(mask_name)[b].narrow(0, 0, n).fill_(1);
  };
  put("input_ids", s.input_ids, "attention_mask");
  put("decoder_input_ids", s.decoder_input_ids, "decoder_attention_mask");
  put("labels", s.labels, nullptr);
}

Features empty_batch(int64_t B, const Seq2SeqTextOptions& o, const Seq2SeqVocabulary& v) {
  const int64_t S = o.src_max_sequence_length, T = o.tgt_max_sequence_length;
  auto longs = torch::kLong;
  return {{"input_ids", torch::full({B, S}, v.input_pad, longs)},
          {"attention_mask", torch::zeros({B, S}, longs)},
          {"decoder_input_ids", torch::full({B, T}, v.input_pad, longs)},
          {"decoder_attention_mask", torch::zeros({B, T}, longs)},
          {"labels", torch::full({B, T}, v.labels_pad, longs)}};
}

void finish_batch(Features& f, const Seq2SeqTextOptions& o, const Seq2SeqVocabulary& v,
                  std::optional<int64_t> vocab_size, const std::string& where) {
  // Ids come from the vocabulary file and its extra_ids: all below v.size.
  if (vocab_size && v.size > *vocab_size)
    throw std::runtime_error(where + ": src_vocab_file " + v.words.file() + " has " + std::to_string(v.words.size()) +
                             " tokens, with extra_ids " + std::to_string(o.extra_ids) + " ids up to " +
                             std::to_string(v.size - 1) + ", beyond the model's vocabulary of " +
                             std::to_string(*vocab_size));
  if (o.dynamic_loss_weight) {
    const int64_t B = f.at("labels").size(0);
    const double targets = std::max<double>(1.0, f.at("decoder_attention_mask").sum().item<double>());
    f["loss_weight"] = torch::full({B, 1}, double(B) / targets, torch::kFloat);
  }
}

}  // namespace

std::vector<bool> random_spans_noise_mask(int64_t length, SplitMix64& rng, double noise_density,
                                          double mean_noise_span_length) {
  const int64_t original = length;
  length = std::max<int64_t>(length, 2);
  int64_t noise = round_half_even(double(length) * noise_density);
  noise = std::min(std::max<int64_t>(noise, 1), length - 1);
  const int64_t spans = std::max<int64_t>(round_half_even(double(noise) / mean_noise_span_length), 1);
  const std::vector<int64_t> noise_lengths = random_segmentation(noise, spans, rng);
  const std::vector<int64_t> kept_lengths = random_segmentation(length - noise, spans, rng);
  std::vector<bool> mask;
  for (int64_t k = 0; k < spans; ++k) {
    mask.insert(mask.end(), static_cast<size_t>(kept_lengths[static_cast<size_t>(k)]), false);
    mask.insert(mask.end(), static_cast<size_t>(noise_lengths[static_cast<size_t>(k)]), true);
  }
  mask.resize(static_cast<size_t>(original));
  return mask;
}

DenoisingSample span_corruption(const std::vector<int64_t>& tokens, const std::vector<bool>& noise, int64_t vocab_size,
                                int64_t sos, int64_t eos) {
  // Each run of the chosen positions becomes one sentinel, counting down from vocab_size - 1.
  auto replace_runs = [&](bool chosen) {
    std::vector<int64_t> out;
    int64_t sentinel = vocab_size;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const bool in_run = noise[i] == chosen;
      if (!in_run) out.push_back(tokens[i]);
      else if (i == 0 || noise[i - 1] != chosen) out.push_back(--sentinel);
    }
    return out;
  };
  DenoisingSample s;
  s.input_ids = replace_runs(true);
  const std::vector<int64_t> targets = replace_runs(false);
  s.decoder_input_ids.push_back(sos);
  s.decoder_input_ids.insert(s.decoder_input_ids.end(), targets.begin(), targets.end());
  s.labels = targets;
  s.labels.push_back(eos);
  return s;
}

std::pair<int64_t, int64_t> raw_sequence_lengths(int64_t max_source_length) {
  auto after_masking = [](int64_t raw) {  // (source, target) lengths, as modelzoo's get_post_masking_lens
    const int64_t noise = round_half_even(double(raw) * 0.15), kept = raw - noise;
    const int64_t spans = round_half_even(double(noise) / 3.0);
    return std::make_pair(kept + spans + 1, noise + spans + 1);
  };
  int64_t raw = max_source_length;
  while (after_masking(raw).first < max_source_length) ++raw;
  return {raw, after_masking(raw).second};
}

Seq2SeqVocabulary::Seq2SeqVocabulary(const Seq2SeqTextOptions& o)
    : words([&] {
        try {
          return LineVocabulary(o.src_vocab_file, o.do_lower);
        } catch (const std::runtime_error& e) {
          throw LoaderOptionError("src_vocab_file", e.what());
        }
      }()) {
  size = words.size() + o.extra_ids;
  auto id_of = [&](const std::string& token, const char* key) {
    const auto id = words.find(token);
    if (!id) throw LoaderOptionError(key, "'" + token + "' is not in src_vocab_file " + o.src_vocab_file);
    return *id;
  };
  oov = id_of(o.oov_token, "oov_token");
  sos = id_of(o.sos_token, "sos_token");
  eos = id_of(o.eos_token, "eos_token");
  const int64_t pad = o.input_pad_id && o.labels_pad_id ? 0 : id_of(o.pad_token, "pad_token");
  input_pad = o.input_pad_id.value_or(pad);
  labels_pad = o.labels_pad_id.value_or(pad);
}

std::vector<int64_t> Seq2SeqVocabulary::ids(const std::vector<std::string>& tokens) const {
  std::vector<int64_t> out;
  out.reserve(tokens.size());
  for (const auto& t : tokens) out.push_back(words.id(t, oov));
  return out;
}

T5TextSource::T5TextSource(const Seq2SeqTextOptions& o) : o_(o), vocab_(o) {
  int64_t target_length = 0;
  std::tie(raw_length_, target_length) = raw_sequence_lengths(o.src_max_sequence_length);
  if (target_length > o.tgt_max_sequence_length)
    throw LoaderOptionError(
        "tgt_max_sequence_length",
        "span corruption of " + std::to_string(raw_length_) + "-token pieces (what src_max_sequence_length " +
            std::to_string(o.src_max_sequence_length) + " holds) gives targets of up to " +
            std::to_string(target_length) + " tokens: raise tgt_max_sequence_length to at least that");
  constexpr int64_t kLongestDocument = 65536;  // modelzoo's select_random_chunk: one such chunk of a longer document
  int64_t document = 0;
  for (const auto& dir : o.src_data_dir.items) {
    for (const auto& entry : read_meta(dir, 2)) {
      const std::string file = resolve(dir, entry[0]);
      const int64_t lines = line_count(entry, dir);
      std::ifstream in(file, std::ios::binary);
      if (!in) throw std::runtime_error(file + " (listed in " + dir + "/meta.dat): cannot be read");
      files_.push_back(file);
      std::string line;
      for (int64_t n = 0; n < lines; ++n, ++document) {
        const int64_t at = in.tellg();
        if (!std::getline(in, line))
          throw std::runtime_error(file + ": " + std::to_string(n) + " lines, but meta.dat says " +
                                   std::to_string(lines));
        const std::vector<std::pair<int64_t, int64_t>> tokens = token_bytes(line);
        int64_t first = 0, count = static_cast<int64_t>(tokens.size());
        if (count > kLongestDocument) {  // the chunk is drawn once, from the seed and the document
          SplitMix64 pick{SplitMix64::mix(static_cast<uint64_t>(o.shuffle_seed) ^ SplitMix64::mix(document))};
          first = kLongestDocument * static_cast<int64_t>(pick.below(
                                         static_cast<uint64_t>((count + kLongestDocument - 1) / kLongestDocument)));
          count = std::min(kLongestDocument, count - first);
        }
        for (int64_t start = first; start < first + count; start += raw_length_) {  // each piece's bytes alone
          const int64_t last = std::min(start + raw_length_, first + count) - 1;
          const int64_t begin = tokens[static_cast<size_t>(start)].first,
                        end = tokens[static_cast<size_t>(last)].second;
          pieces_.push_back({{static_cast<int32_t>(files_.size() - 1), at + begin}, end - begin});
        }
      }
    }
  }
}

std::string T5TextSource::describe() const { return describe_dirs(o_.src_data_dir); }

Features T5TextSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  const int64_t B = static_cast<int64_t>(ids.size()), N = num_samples();
  Features f = empty_batch(B, o_, vocab_);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t epoch = ids[static_cast<size_t>(b)] / N, i = ids[static_cast<size_t>(b)] % N;
    const Piece& piece = pieces_[static_cast<size_t>(i)];
    const std::vector<int64_t> token_ids =
        vocab_.ids(split_tokens(read_bytes(files_[piece.start.file], piece.start.at, piece.bytes), o_.do_lower));
    SplitMix64 rng{SplitMix64::mix(static_cast<uint64_t>(o_.shuffle_seed) * 0x9E3779B97F4A7C15ull ^
                                   SplitMix64::mix(static_cast<uint64_t>(epoch) << 40 ^ static_cast<uint64_t>(i)))};
    const std::vector<bool> noise = random_spans_noise_mask(static_cast<int64_t>(token_ids.size()), rng);
    put_row(f, b, span_corruption(token_ids, noise, vocab_.size, vocab_.sos, vocab_.eos));
  }
  finish_batch(f, o_, vocab_, vocab_size, describe());
  return f;
}

TransformerTextSource::TransformerTextSource(const Seq2SeqTextOptions& o) : o_(o), vocab_(o) {
  for (const auto& dir : o.src_data_dir.items) {
    for (const auto& entry : read_meta(dir, 3)) {
      const std::string source = resolve(dir, entry[0]), target = resolve(dir, entry[1]);
      const int64_t lines = line_count(entry, dir);
      std::ifstream src(source, std::ios::binary), tgt(target, std::ios::binary);
      if (!src) throw std::runtime_error(source + " (listed in " + dir + "/meta.dat): cannot be read");
      if (!tgt) throw std::runtime_error(target + " (listed in " + dir + "/meta.dat): cannot be read");
      files_.push_back(source);
      files_.push_back(target);
      const int32_t s = static_cast<int32_t>(files_.size() - 2), t = s + 1;
      std::string a, b;
      for (int64_t n = 0; n < lines; ++n) {
        const int64_t at_a = src.tellg(), at_b = tgt.tellg();
        if (!std::getline(src, a) || !std::getline(tgt, b))
          throw std::runtime_error((src ? target : source) + ": fewer lines than the " + std::to_string(lines) +
                                   " meta.dat says");
        const int64_t na = count_tokens(a), nb = count_tokens(b);
        // modelzoo keeps 0 < length < max on both sides (the target gains <s> or </s>)
        if (na > 0 && na < o.src_max_sequence_length && nb > 0 && nb < o.tgt_max_sequence_length)
          pairs_.push_back({{s, at_a}, {t, at_b}});
        else ++skipped_;
      }
    }
  }
}

std::string TransformerTextSource::describe() const { return describe_dirs(o_.src_data_dir); }

Features TransformerTextSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  const int64_t B = static_cast<int64_t>(ids.size());
  Features f = empty_batch(B, o_, vocab_);
  for (int64_t b = 0; b < B; ++b) {
    const auto& [source, target] = pairs_[static_cast<size_t>(ids[static_cast<size_t>(b)] % num_samples())];
    DenoisingSample s;  // no corruption: the source as is, the target after <s> and before </s>
    s.input_ids = vocab_.ids(split_tokens(read_line_at(files_[source.file], source.at), o_.do_lower));
    const std::vector<int64_t> tgt =
        vocab_.ids(split_tokens(read_line_at(files_[target.file], target.at), o_.do_lower));
    s.decoder_input_ids.push_back(vocab_.sos);
    s.decoder_input_ids.insert(s.decoder_input_ids.end(), tgt.begin(), tgt.end());
    s.labels = tgt;
    s.labels.push_back(vocab_.eos);
    put_row(f, b, s);
  }
  finish_batch(f, o_, vocab_, vocab_size, describe());
  return f;
}

namespace {

template <class Source>
std::unique_ptr<DataLoader> open_text(const Seq2SeqTextOptions& o, const config::Origin& at) {
  return open_map_source<Source>(o, at, o.src_data_dir, "src_data_dir");
}

const std::vector<std::string> kSeq2SeqFeatures = {
    "input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask", "labels", "loss_weight"};

std::vector<std::string> seq2seq_features(const Seq2SeqTextOptions& o) {
  std::vector<std::string> f(kSeq2SeqFeatures.begin(), kSeq2SeqFeatures.end() - 1);
  if (o.dynamic_loss_weight) f.push_back("loss_weight");
  return f;
}

}  // namespace

DataProcessor t5_text_processor() {
  return make_data_processor<Seq2SeqTextOptions>(
      "T5DynamicDataProcessor",
      "T5 span corruption of text files of space-separated tokens (one document per line), corrupted anew each epoch.",
      kSeq2SeqFeatures, open_text<T5TextSource>, seq2seq_features);
}

DataProcessor transformer_text_processor() {
  return make_data_processor<Seq2SeqTextOptions>(
      "TransformerDynamicDataProcessor",
      "Translation pairs: source and target text files of space-separated tokens, line by line.", kSeq2SeqFeatures,
      open_text<TransformerTextSource>, seq2seq_features);
}

}  // namespace zoo::data
