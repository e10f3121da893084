// Implementation of data/bert_csv.h.
#include "data/bert_csv.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/splitmix.h"
#include "data/text/utf8.h"

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

std::vector<std::string> split_csv_record(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') fields.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else fields.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r' && c != '\n') {
      fields.back() += c;
    }
  }
  return fields;
}

namespace {

std::string lower_ascii(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string strip(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n\f\v"), b = s.find_last_not_of(" \t\r\n\f\v");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// Reads one CSV record at the stream's position (quoted fields may hold newlines); false at the end.
bool read_record(std::istream& in, std::string& record) {
  record.clear();
  std::string line;
  bool quoted = false;
  while (std::getline(in, line)) {
    for (char c : line)
      if (c == '"') quoted = !quoted;
    record += line;
    if (!quoted) return true;
    record += '\n';
  }
  return !record.empty();
}

}  // namespace

std::vector<std::string> parse_python_string_list(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto bad = [&](const std::string& what) {
    throw std::invalid_argument("expected a Python list of strings, " + what + " at character " + std::to_string(i));
  };
  skip();
  if (i >= text.size() || text[i] != '[') bad("no '['");
  ++i;
  skip();
  if (i < text.size() && text[i] == ']') return out;
  while (true) {
    skip();
    if (i >= text.size() || (text[i] != '\'' && text[i] != '"')) bad("no quoted string");
    const char quote = text[i++];
    std::string s;
    while (true) {
      if (i >= text.size()) bad("an unterminated string");
      const char c = text[i++];
      if (c == quote) break;
      if (c != '\\') {
        s += c;
        continue;
      }
      if (i >= text.size()) bad("an unterminated escape");
      const char e = text[i++];
      auto hex = [&](int digits) {
        if (i + digits > text.size()) bad("a short \\x/\\u escape");
        const uint32_t cp = static_cast<uint32_t>(std::stoul(text.substr(i, digits), nullptr, 16));
        i += digits;
        text::append_utf8(s, cp);
      };
      switch (e) {
        case 'n': s += '\n'; break;
        case 't': s += '\t'; break;
        case 'r': s += '\r'; break;
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        default: s += e;  // \\, \', \"
      }
    }
    out.push_back(std::move(s));
    skip();
    if (i < text.size() && text[i] == ',') {
      ++i;
      skip();
      if (i < text.size() && text[i] == ']') return out;
      continue;
    }
    if (i < text.size() && text[i] == ']') return out;
    bad("no ',' or ']'");
  }
}

BertCsvSource::BertCsvSource(const BertCsvOptions& o) : o_(o) {
  // The vocabulary: line k is id k (a repeated token keeps its last line, as modelzoo's dict).
  std::ifstream vf(o.vocab_file);
  if (!vf) throw LoaderOptionError("vocab_file", o.vocab_file + ": cannot be read");
  std::string line;
  int64_t lines = 0;
  for (; std::getline(vf, line); ++lines) vocab_[o.do_lower ? lower_ascii(strip(line)) : strip(line)] = lines;
  auto id_of = [&](const std::string& token, const char* key) {
    const auto it = vocab_.find(o.do_lower ? lower_ascii(token) : token);
    if (it == vocab_.end())
      throw LoaderOptionError(key, "'" + token + "' is not in vocab_file " + o.vocab_file);
    return it->second;
  };
  oov_id_ = id_of(o.oov_token, "oov_token");
  mask_id_ = id_of(o.mask_token, "mask_token");
  id_of(o.document_separator_token, "document_separator_token");
  std::vector<bool> excluded(static_cast<size_t>(lines), false);
  for (const auto& t : o.exclude_from_masking) {
    excluded_tokens_.insert(o.do_lower ? lower_ascii(t) : t);
    const auto it = vocab_.find(o.do_lower ? lower_ascii(t) : t);
    excluded[static_cast<size_t>(it == vocab_.end() ? oov_id_ : it->second)] = true;  // modelzoo: unknown -> oov
  }
  for (int64_t id = 0; id < lines; ++id)
    if (!excluded[static_cast<size_t>(id)]) replacement_pool_.push_back(id);

  // meta.dat in each data_dir: "file rows" per line; the rows' byte offsets are indexed.
  for (const std::string& dir : o.data_dir.items) {
    const std::string meta = (std::filesystem::path(dir) / "meta.dat").string();
    std::ifstream mf(meta);
    if (!mf) throw std::runtime_error(meta + ": missing (modelzoo's CSV data lists its files and rows there)");
    for (int line_no = 1; std::getline(mf, line); ++line_no) {
      std::istringstream fields(line);
      std::string name;
      int64_t count = -1;
      if (!(fields >> name)) continue;
      if (!(fields >> count) || count < 0)
        throw std::runtime_error(meta + ":" + std::to_string(line_no) + ": expected 'file rows', got '" + line + "'");
      const std::string file = (std::filesystem::path(dir) / name).string();
      std::ifstream csv(file, std::ios::binary);
      if (!csv) throw std::runtime_error(file + " (listed in " + meta + "): cannot be read");
      std::string record;
      if (!read_record(csv, record)) throw std::runtime_error(file + ": empty, expected a header row");
      std::vector<std::string> header = split_csv_record(record);
      for (const char* column : {"tokens", "segment_ids", "is_random_next"})
        if ((column == std::string("tokens") || !o.disable_nsp) &&
            std::find(header.begin(), header.end(), column) == header.end())
          throw std::runtime_error(file + ": no '" + column + "' column (has: " + record + ")");
      const int32_t f = static_cast<int32_t>(files_.size());
      files_.push_back(file);
      headers_.push_back(std::move(header));
      int64_t found = 0;
      for (int64_t at = csv.tellg(); found < count && read_record(csv, record); at = csv.tellg()) {
        if (strip(record).empty()) continue;
        rows_.push_back({f, at});
        ++found;
      }
      if (found < count)
        throw std::runtime_error(meta + " says " + name + " has " + std::to_string(count) + " rows; it has " +
                                 std::to_string(found));
    }
  }
  if (rows_.empty()) throw std::runtime_error("no rows in the files meta.dat lists");
}

std::string BertCsvSource::describe() const {
  std::string dirs;
  for (const auto& d : o_.data_dir.items) dirs += (dirs.empty() ? "" : ", ") + d;
  return dirs;
}

std::string BertCsvSource::where(int64_t i) const {
  // the row's number in its file: count the rows before it in that file
  int64_t first = i;
  while (first > 0 && rows_[static_cast<size_t>(first - 1)].file == rows_[static_cast<size_t>(i)].file) --first;
  return files_[static_cast<size_t>(rows_[static_cast<size_t>(i)].file)] + ", row " + std::to_string(i - first + 1);
}

BertCsvSource::Sample BertCsvSource::read_row(int64_t i) const {
  const Row& row = rows_[static_cast<size_t>(i)];
  std::ifstream in(files_[static_cast<size_t>(row.file)], std::ios::binary);
  in.seekg(row.offset);
  std::string record;
  if (!in || !read_record(in, record)) throw std::runtime_error(where(i) + ": cannot be read");
  const std::vector<std::string> fields = split_csv_record(record);
  const std::vector<std::string>& header = headers_[static_cast<size_t>(row.file)];
  auto column = [&](const std::string& name) -> const std::string& {
    const size_t k = static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
    if (k >= fields.size())
      throw std::runtime_error(where(i) + ": " + std::to_string(fields.size()) + " fields, no '" + name + "'");
    return fields[k];
  };
  Sample s;
  try {
    s.tokens = parse_python_string_list(column("tokens"));
    if (o_.disable_nsp) return s;
    std::string segs = column("segment_ids");
    std::replace(segs.begin(), segs.end(), '[', ' ');
    std::replace(segs.begin(), segs.end(), ']', ' ');
    std::replace(segs.begin(), segs.end(), ',', ' ');
    std::istringstream in_segs(segs);
    for (int64_t v; in_segs >> v;) s.segments.push_back(v);
    s.is_random_next = std::stoll(column("is_random_next"));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(where(i) + ": " + e.what());
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
      throw std::runtime_error(where(i) + ": " + std::to_string(n) + " tokens, more than max_sequence_length " +
                               std::to_string(T) + " (with NSP rows are not cut)");
    std::vector<int64_t> token_ids(static_cast<size_t>(n)), row_labels(static_cast<size_t>(T), o_.labels_pad_id);
    for (int64_t t = 0; t < n; ++t) {
      std::string& token = s.tokens[static_cast<size_t>(t)];
      if (o_.do_lower) token = lower_ascii(token);
      const auto it = vocab_.find(token);
      token_ids[static_cast<size_t>(t)] = it == vocab_.end() ? oov_id_ : it->second;
      if (vocab_size && token_ids[static_cast<size_t>(t)] >= *vocab_size)
        throw std::runtime_error(where(i) + ": token '" + token + "' has id " +
                                 std::to_string(token_ids[static_cast<size_t>(t)]) + " in vocab_file, not below the "
                                 "model's vocab_size " + std::to_string(*vocab_size));
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
  Features f = {{"input_ids", input_ids}, {"attention_mask", attention}, {"labels", labels},
                {"masked_lm_mask", mlm_mask}};
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

std::unique_ptr<DataLoader> open_bert_csv(const BertCsvOptions& o, const config::Origin& at) {
  for (const auto& dir : o.data_dir.items) require_directory(dir, at);
  std::shared_ptr<BertCsvSource> source;
  try {
    source = std::make_shared<BertCsvSource>(o);
  } catch (const LoaderOptionError&) {
    throw;
  } catch (const std::exception& e) {
    at.fail("data_dir", e.what());
  }
  if (source->num_samples() < o.batch_size)
    at.fail("data_dir", std::to_string(source->num_samples()) + " row(s), fewer than batch_size " +
                            std::to_string(o.batch_size));
  return std::make_unique<MapStyleLoader>(source, o);
}
}  // namespace

DataProcessor bert_csv_processor() {
  return make_data_processor<BertCsvOptions>(
      "BertCSVDynamicMaskDataProcessor",
      "BERT masked-LM (and NSP) samples from modelzoo's pre-training CSV files (meta.dat, `tokens`, `segment_ids`, "
      "`is_random_next`), masked anew each epoch.",
      {"input_ids", "attention_mask", "labels", "masked_lm_mask", "masked_lm_positions", "token_type_ids",
       "next_sentence_label"},
      open_bert_csv, produced);
}

}  // namespace zoo::data
