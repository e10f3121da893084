// Implementation of runner/eval_tasks/task_file.h with nlohmann::json.
#include "runner/eval_tasks/task_file.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "data/text/unicode.h"
#include "data/text/utf8.h"

namespace zoo::eval_tasks {

namespace {

using nlohmann::json;

// Thrown while reading one record; the caller adds the file and line.
struct RecordError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string type_of(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_boolean()) return "true/false";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}

std::string string_field(const json& record, const std::string& key, bool allow_empty = true) {
  const json& v = record.at(key);
  if (!v.is_string()) throw RecordError("\"" + key + "\": expected a string, got " + type_of(v));
  std::string s = v.get<std::string>();
  if (s.empty() && !allow_empty) throw RecordError("\"" + key + "\": expected a non-empty string");
  return s;
}

std::vector<std::string> strings_field(const json& record, const std::string& key, size_t min_size, size_t max_size) {
  const json& v = record.at(key);
  if (!v.is_array()) throw RecordError("\"" + key + "\": expected a list of strings, got " + type_of(v));
  if (v.size() < min_size || v.size() > max_size)
    throw RecordError("\"" + key + "\": expected " + std::to_string(min_size) + " to " + std::to_string(max_size) +
                      " strings, got " + std::to_string(v.size()));
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string())
      throw RecordError("\"" + key + "\"[" + std::to_string(i) + "]: expected a string, got " + type_of(v[i]));
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

int64_t int_field(const json& record, const std::string& key, int64_t min, int64_t max) {
  const json& v = record.at(key);
  if (!v.is_number_integer()) throw RecordError("\"" + key + "\": expected an integer, got " + type_of(v));
  const int64_t x = v.get<int64_t>();
  if (x < min || x > max)
    throw RecordError("\"" + key + "\": expected " + std::to_string(min) + ".." + std::to_string(max) + ", got " +
                      std::to_string(x));
  return x;
}

TaskKind kind_of(const json& record) {
  if (record.contains("choices") || record.contains("contexts")) return TaskKind::multiple_choice;
  if (record.contains("text")) return TaskKind::rolling;
  if (record.contains("until")) return TaskKind::generate_until;
  if (record.contains("continuation")) return TaskKind::loglikelihood;
  throw RecordError(
      "cannot tell the task's kind: expected \"choices\" (multiple choice), \"contexts\" (multiple "
      "choice, one context per choice), \"continuation\" (loglikelihood), \"text\" (rolling "
      "loglikelihood) or \"until\" (generate_until); see docs/evaluation.md");
}

void check_keys(const json& record, TaskKind kind, const std::set<std::string>& allowed,
                const std::set<std::string>& required) {
  for (const auto& [key, value] : record.items())
    if (!allowed.count(key) && key != "id") {
      std::string known;
      for (const auto& k : allowed) known += (known.empty() ? "" : ", ") + k;
      throw RecordError("unknown key \"" + key + "\" in a " + kind_name(kind) + " record (expected " + known + ")");
    }
  for (const auto& key : required)
    if (!record.contains(key)) throw RecordError("a " + std::string(kind_name(kind)) + " record needs \"" + key + "\"");
}

TaskDoc read_record(const json& record, TaskKind kind, const TaskFileLimits& limits) {
  TaskDoc d;
  switch (kind) {
    case TaskKind::multiple_choice:
      if (record.contains("contexts")) {  // one context per choice, one continuation
        check_keys(record, kind, {"contexts", "continuation", "gold"}, {"contexts", "continuation", "gold"});
        d.contexts = strings_field(record, "contexts", 2, limits.max_choices);
        d.continuations = {string_field(record, "continuation", false)};
        d.choices = d.contexts;
      } else {
        check_keys(record, kind, {"context", "choices", "gold", "target_delimiter"}, {"context", "choices", "gold"});
        d.contexts = {string_field(record, "context")};
        d.choices = strings_field(record, "choices", 2, limits.max_choices);
        const std::string delimiter =
            record.contains("target_delimiter") ? string_field(record, "target_delimiter") : " ";
        for (const auto& c : d.choices) {
          if (delimiter.empty() && c.empty())
            throw RecordError("\"choices\": an empty choice with an empty target_delimiter scores nothing");
          d.continuations.push_back(delimiter + c);
        }
      }
      d.gold = int_field(record, "gold", 0, static_cast<int64_t>(d.choices.size()) - 1);
      break;
    case TaskKind::loglikelihood:
      check_keys(record, kind, {"context", "continuation"}, {"context", "continuation"});
      d.contexts = {string_field(record, "context")};
      d.continuations = {string_field(record, "continuation", false)};
      break;
    case TaskKind::rolling:
      check_keys(record, kind, {"text", "words", "bytes"}, {"text"});
      d.text = string_field(record, "text", false);
      d.words = record.contains("words") ? int_field(record, "words", 1, INT64_MAX) : python_word_count(d.text);
      d.bytes =
          record.contains("bytes") ? int_field(record, "bytes", 1, INT64_MAX) : static_cast<int64_t>(d.text.size());
      break;
    case TaskKind::generate_until:
      check_keys(record, kind, {"context", "until", "target", "max_gen_toks"}, {"context", "until", "target"});
      d.contexts = {string_field(record, "context")};
      if (record.at("until").is_string()) d.until = {string_field(record, "until", false)};
      else d.until = strings_field(record, "until", 0, limits.max_choices);
      for (const auto& u : d.until)
        if (u.empty()) throw RecordError("\"until\": an empty stop string would end every generation at once");
      d.target = string_field(record, "target");
      if (record.contains("max_gen_toks")) d.max_gen_toks = int_field(record, "max_gen_toks", 1, 1'000'000);
      break;
  }
  return d;
}

// The next line (its '\n' dropped) into `line`; false at the end of the file.
// Stops once the line passes `max` bytes, so a file without newlines is not
// read whole into memory.
bool read_line(std::istream& in, std::string& line, size_t max) {
  line.clear();
  std::streambuf* buf = in.rdbuf();
  bool got = false;
  for (int c; (c = buf->sbumpc()) != std::char_traits<char>::eof();) {
    got = true;
    if (c == '\n') return true;
    line.push_back(static_cast<char>(c));
    if (line.size() > max) return true;
  }
  return got;
}

}  // namespace

const char* kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::multiple_choice: return "multiple_choice";
    case TaskKind::loglikelihood: return "loglikelihood";
    case TaskKind::rolling: return "rolling";
    case TaskKind::generate_until: return "generate_until";
  }
  return "?";
}

bool is_python_space(char32_t cp) { return text::is_whitespace(cp) || (cp >= 0x1c && cp <= 0x1f); }

int64_t python_len(std::string_view utf8) { return static_cast<int64_t>(text::decode_utf8(std::string(utf8)).size()); }

namespace {

// `text` less the whitespace at its start (when `left`) and at its end.
std::string python_trim(const std::string& text, bool left) {
  const std::u32string cps = text::decode_utf8(text);
  size_t begin = 0, end = cps.size();
  while (left && begin < end && is_python_space(cps[begin])) ++begin;
  while (end > begin && is_python_space(cps[end - 1])) --end;
  return text::encode_utf8(cps.substr(begin, end - begin));
}

}  // namespace

std::string python_strip(const std::string& text) { return python_trim(text, true); }
std::string python_rstrip(const std::string& text) { return python_trim(text, false); }

std::string same_named_tasks(const std::vector<std::string>& paths) {
  std::map<std::string, std::string> by_name;
  for (const auto& path : paths) {
    const std::string name = std::filesystem::path(path).stem().string();
    const auto [it, fresh] = by_name.emplace(name, path);
    if (!fresh)
      return path + " and " + it->second + " are both task '" + name +
             "' (a task is named by its file's stem); rename one";
  }
  return "";
}

int64_t python_word_count(std::string_view utf8) {
  int64_t pieces = 1;
  bool in_space = false;
  for (char32_t cp : text::decode_utf8(std::string(utf8))) {
    const bool space = is_python_space(cp);
    if (space && !in_space) ++pieces;  // each run of whitespace splits once
    in_space = space;
  }
  return pieces;
}

TaskFile read_task_file(const std::string& path, int64_t limit, const TaskFileLimits& limits) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw std::runtime_error(path + ": no such task file (expected a JSON Lines file; docs/evaluation.md)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  TaskFile file;
  file.path = path;
  file.name = fs::path(path).stem().string();
  std::string line;
  int64_t line_no = 0;
  bool have_kind = false;
  while (read_line(in, line, limits.max_line_bytes)) {
    ++line_no;
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    if (line.size() > limits.max_line_bytes)
      throw std::runtime_error(where + "a record longer than " + std::to_string(limits.max_line_bytes) +
                               " bytes (one JSON object per line expected)");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    json record;
    try {
      record = json::parse(line, [&](int depth, json::parse_event_t, json&) {
        if (depth > limits.max_json_depth)
          throw RecordError("the record nests deeper than " + std::to_string(limits.max_json_depth) + " levels");
        return true;
      });
    } catch (const RecordError& e) {
      throw std::runtime_error(where + e.what());
    } catch (const json::exception& e) {
      throw std::runtime_error(where + "not a JSON object on one line (" + e.what() + ")");
    }
    try {
      if (!record.is_object()) throw RecordError("expected a JSON object, got " + type_of(record));
      const TaskKind kind = kind_of(record);
      if (!have_kind) {
        file.kind = kind;
        have_kind = true;
      } else if (kind != file.kind) {
        throw RecordError(std::string("a ") + kind_name(kind) + " record in a " + kind_name(file.kind) +
                          " task (the file's first record set its kind; one kind per file)");
      }
      file.docs.push_back(read_record(record, kind, limits));
      file.docs.back().line = line_no;
    } catch (const RecordError& e) {
      throw std::runtime_error(where + e.what());
    }
    if (static_cast<int64_t>(file.docs.size()) > limits.max_docs)
      throw std::runtime_error(where + "more than " + std::to_string(limits.max_docs) + " records");
    if (limit > 0 && static_cast<int64_t>(file.docs.size()) >= limit) break;
  }
  if (file.docs.empty()) throw std::runtime_error(path + ": no records (expected one JSON object per line)");
  return file;
}

}  // namespace zoo::eval_tasks
