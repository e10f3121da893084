// Implementation of data/csv_table.h.
#include "data/csv_table.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/text/utf8.h"

namespace zoo::data {
namespace {

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

std::vector<int64_t> parse_python_int_list(const std::string& text) {
  std::string digits = text;
  for (char& c : digits)
    if (c == '[' || c == ']' || c == ',') c = ' ';
  std::istringstream in(digits);
  std::vector<int64_t> out;
  for (int64_t v; in >> v;) out.push_back(v);
  if (!in.eof()) throw std::invalid_argument("expected a list of integers, got '" + text.substr(0, 60) + "'");
  return out;
}

CsvTable::CsvTable(const std::vector<std::string>& dirs, const std::vector<std::string>& required) : dirs_(dirs) {
  std::string line;
  for (const std::string& dir : dirs) {
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
      for (const auto& column : required)
        if (std::find(header.begin(), header.end(), column) == header.end())
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

std::string CsvTable::describe() const {
  std::string out;
  for (const auto& d : dirs_) out += (out.empty() ? "" : ", ") + d;
  return out;
}

std::string CsvTable::where(int64_t i) const {
  // the row's number in its file: count the rows before it in that file
  int64_t first = i;
  while (first > 0 && rows_[static_cast<size_t>(first - 1)].file == rows_[static_cast<size_t>(i)].file) --first;
  return files_[static_cast<size_t>(rows_[static_cast<size_t>(i)].file)] + ", row " + std::to_string(i - first + 1);
}

bool CsvTable::has_column(int64_t i, const std::string& name) const {
  const auto& header = headers_[static_cast<size_t>(rows_[static_cast<size_t>(i)].file)];
  return std::find(header.begin(), header.end(), name) != header.end();
}

CsvTable::Row CsvTable::row(int64_t i) const {
  const Offset& o = rows_[static_cast<size_t>(i)];
  std::ifstream in(files_[static_cast<size_t>(o.file)], std::ios::binary);
  in.seekg(o.at);
  std::string record;
  if (!in || !read_record(in, record)) throw std::runtime_error(where(i) + ": cannot be read");
  Row r;
  r.fields_ = split_csv_record(record);
  r.header_ = &headers_[static_cast<size_t>(o.file)];
  r.where_ = where(i);
  return r;
}

const std::string& CsvTable::Row::operator[](const std::string& name) const {
  const size_t k = static_cast<size_t>(std::find(header_->begin(), header_->end(), name) - header_->begin());
  if (k >= fields_.size())
    throw std::runtime_error(where_ + ": " + std::to_string(fields_.size()) + " fields, no '" + name + "'");
  return fields_[k];
}

}  // namespace zoo::data
