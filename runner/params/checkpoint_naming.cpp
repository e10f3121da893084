// Implementation of runner/params/checkpoint_naming.h.
#include "runner/params/checkpoint_naming.h"

#include <regex>
#include <stdexcept>

namespace zoo::ckpt {
namespace {

struct Parsed {
  std::string prefix, suffix, error;
  int width = 0;
};

// Splits `t` around its one {step} field; `error` says what is wrong.
Parsed parse(const std::string& t) {
  Parsed p;
  const std::string expected = "expected a file name with one {step}, {step:d} or {step:0Nd} field (e.g. " +
                               std::string(CheckpointNaming::kDefault) + ")";
  if (t.find('/') != std::string::npos) return {{}, {}, expected + "; a directory is not part of the name"};
  const size_t open = t.find('{');
  const size_t close = open == std::string::npos ? open : t.find('}', open);
  if (close == std::string::npos) return {{}, {}, expected};
  if (t.find_first_of("{}", close + 1) != std::string::npos || t.substr(0, open).find('}') != std::string::npos)
    return {{}, {}, expected + "; braces other than the one field are not supported"};
  static const std::regex field(R"(step(?::(0[0-9]+)?d)?)");
  std::smatch m;
  const std::string inside = t.substr(open + 1, close - open - 1);
  if (!std::regex_match(inside, m, field)) return {{}, {}, expected + ", got {" + inside + "}"};
  p.prefix = t.substr(0, open);
  p.suffix = t.substr(close + 1);
  if (m[1].matched) p.width = std::stoi(m[1].str());
  if (p.width > 20) return {{}, {}, expected + "; at most 20 digits"};
  return p;
}

std::string regex_escape(const std::string& s) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(s, special, R"(\$&)");
}

}  // namespace

CheckpointNaming::CheckpointNaming(const std::string& name_template) {
  Parsed p = parse(name_template);
  if (!p.error.empty()) throw std::invalid_argument("checkpoint_name '" + name_template + "': " + p.error);
  prefix_ = p.prefix, suffix_ = p.suffix, width_ = p.width;
  pattern_ = std::regex(regex_escape(prefix_) + R"((\d+)(?:_(\d{8}_\d{6}))?)" + regex_escape(suffix_));
}

std::string CheckpointNaming::check(const std::string& name_template) { return parse(name_template).error; }

std::string CheckpointNaming::file_name(int64_t step, const std::string& timestamp) const {
  std::string digits = std::to_string(step);
  if (static_cast<int>(digits.size()) < width_) digits.insert(0, width_ - digits.size(), '0');
  return prefix_ + digits + (timestamp.empty() ? "" : "_" + timestamp) + suffix_;
}

std::optional<std::pair<std::string, std::string>> CheckpointNaming::match(const std::string& file_name) const {
  std::smatch m;
  if (!std::regex_match(file_name, m, pattern_)) return std::nullopt;
  return std::make_pair(m[1].str(), m[2].str());
}

}  // namespace zoo::ckpt
