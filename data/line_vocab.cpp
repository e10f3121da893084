// Implementation of data/line_vocab.h.
#include "data/line_vocab.h"

#include <fstream>
#include <stdexcept>

namespace zoo::data {

std::string lower_ascii(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string strip_whitespace(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n\f\v"), b = s.find_last_not_of(" \t\r\n\f\v");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

LineVocabulary::LineVocabulary(const std::string& file, bool do_lower) : file_(file), do_lower_(do_lower) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file + ": cannot be read");
  std::string line;
  for (; std::getline(in, line); ++lines_)
    ids_[do_lower ? lower_ascii(strip_whitespace(line)) : strip_whitespace(line)] = lines_;
}

std::optional<int64_t> LineVocabulary::find(const std::string& token) const {
  const auto it = ids_.find(do_lower_ ? lower_ascii(token) : token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

}  // namespace zoo::data
