// Implementation of runner/checkpoint/checkpoint_diff.h.
#include "runner/checkpoint/checkpoint_diff.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "runner/checkpoint/checkpoint.h"

namespace zoo::ckpt {
namespace {

constexpr int kMaxDepth = 64;  // nesting of dicts and lists in a checkpoint

std::string key_text(const c10::IValue& key) {
  if (key.isString()) return key.toStringRef();
  if (key.isInt()) return std::to_string(key.toInt());
  std::ostringstream s;
  s << key;
  return s.str();
}

// Every leaf (tensor, number, string, ...) under `value`, by dotted name.
void flatten(const c10::IValue& value, const std::string& name, std::map<std::string, c10::IValue>& out, int depth) {
  if (depth > kMaxDepth) throw std::runtime_error(name + ": nested more than " + std::to_string(kMaxDepth) + " levels");
  auto child = [&](const std::string& k) { return name.empty() ? k : name + "." + k; };
  if (value.isGenericDict()) {
    for (const auto& kv : value.toGenericDict()) flatten(kv.value(), child(key_text(kv.key())), out, depth + 1);
  } else if (value.isList()) {
    const auto list = value.toList();
    for (size_t i = 0; i < list.size(); ++i) flatten(list.get(i), child(std::to_string(i)), out, depth + 1);
  } else if (value.isTuple()) {
    const auto tuple = value.toTuple();
    const auto& elements = tuple->elements();
    for (size_t i = 0; i < elements.size(); ++i) flatten(elements[i], child(std::to_string(i)), out, depth + 1);
  } else {
    out[name] = value;
  }
}

std::map<std::string, c10::IValue> entries_of(const std::string& path, const CheckpointDiffCommand& command) {
  const c10::impl::GenericDict dict = load_checkpoint_file(path);
  std::map<std::string, c10::IValue> out;
  for (const auto& kv : dict) {
    const std::string key = key_text(kv.key());
    if (key == "__metadata__" && !command.metadata) continue;
    flatten(kv.value(), key, out, 0);
  }
  return out;
}

std::string text_of(const c10::IValue& v) {
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    return std::string(c10::toString(t.scalar_type())) + " " + c10::str(t.sizes());
  }
  std::ostringstream s;
  s << v;
  return s.str();
}

EntryDiff compare(const std::string& name, const c10::IValue& a, const c10::IValue& b,
                  const CheckpointDiffCommand& command) {
  EntryDiff d;
  d.name = name;
  if (!a.isTensor() || !b.isTensor()) {
    const bool same = a.isTensor() == b.isTensor() && a.tagKind() == b.tagKind() && text_of(a) == text_of(b);
    if (!same) d.status = EntryDiff::Status::differs, d.detail = text_of(a) + " vs " + text_of(b);
    return d;
  }
  const torch::Tensor& x = a.toTensor();
  const torch::Tensor& y = b.toTensor();
  if (x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type()) {
    d.status = EntryDiff::Status::mismatch;
    d.detail = text_of(a) + " vs " + text_of(b);
    return d;
  }
  if (torch::equal(x, y)) return d;
  const torch::Tensor dx = x.to(torch::kDouble), dy = y.to(torch::kDouble);
  const torch::Tensor delta = dx - dy;
  d.max_abs = delta.abs().max().item<double>();
  d.mse = delta.pow(2).mean().item<double>();
  d.status = !command.exact && torch::allclose(dx, dy, command.rtol, command.atol) ? EntryDiff::Status::close
                                                                                   : EntryDiff::Status::differs;
  return d;
}

std::string number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9e", v);
  return buffer;
}

}  // namespace

bool CheckpointDiff::same() const {
  for (const auto& e : entries)
    if (e.status != EntryDiff::Status::equal && e.status != EntryDiff::Status::close) return false;
  return true;
}

CheckpointDiff diff_checkpoints(const CheckpointDiffCommand& command) {
  std::regex keys;
  try {
    keys = std::regex(command.keys.empty() ? std::string(".*") : command.keys);
  } catch (const std::regex_error& e) {
    throw std::runtime_error("--keys " + command.keys + ": not a regular expression (" + e.what() + ")");
  }
  const auto a = entries_of(command.a, command);
  const auto b = entries_of(command.b, command);
  CheckpointDiff diff;
  auto wanted = [&](const std::string& name) { return command.keys.empty() || std::regex_search(name, keys); };
  for (const auto& [name, value] : a) {
    if (!wanted(name)) continue;
    auto other = b.find(name);
    if (other == b.end()) {
      diff.entries.push_back({name, EntryDiff::Status::only_in_a, text_of(value)});
    } else {
      diff.entries.push_back(compare(name, value, other->second, command));
    }
  }
  for (const auto& [name, value] : b)
    if (wanted(name) && !a.count(name)) diff.entries.push_back({name, EntryDiff::Status::only_in_b, text_of(value)});
  std::sort(diff.entries.begin(), diff.entries.end(),
            [](const EntryDiff& x, const EntryDiff& y) { return x.name < y.name; });
  return diff;
}

void describe(const CheckpointDiff& diff, const CheckpointDiffCommand& command, std::ostream& out) {
  out << "A: " << command.a << "\nB: " << command.b << "\n";
  std::map<EntryDiff::Status, int64_t> counts;
  for (const auto& e : diff.entries) {
    ++counts[e.status];
    switch (e.status) {
      case EntryDiff::Status::equal: break;
      case EntryDiff::Status::close:
      case EntryDiff::Status::differs:
        out << "  " << e.name << ": " << (e.status == EntryDiff::Status::close ? "close" : "differs");
        if (e.detail.empty()) out << ", max |a-b| " << number(e.max_abs) << ", mse " << number(e.mse);
        else out << ", " << e.detail;
        out << "\n";
        break;
      case EntryDiff::Status::only_in_a: out << "  " << e.name << ": only in A (" << e.detail << ")\n"; break;
      case EntryDiff::Status::only_in_b: out << "  " << e.name << ": only in B (" << e.detail << ")\n"; break;
      case EntryDiff::Status::mismatch: out << "  " << e.name << ": " << e.detail << "\n"; break;
    }
  }
  out << diff.entries.size() << " entries compared" << (command.keys.empty() ? "" : " (--keys " + command.keys + ")")
      << (command.metadata ? "" : ", __metadata__ left out") << ": " << counts[EntryDiff::Status::equal] << " equal, "
      << counts[EntryDiff::Status::close] << " close (rtol " << command.rtol << ", atol " << command.atol << "), "
      << counts[EntryDiff::Status::differs] << " differ, " << counts[EntryDiff::Status::mismatch]
      << " of another shape or dtype, " << counts[EntryDiff::Status::only_in_a] << " only in A, "
      << counts[EntryDiff::Status::only_in_b] << " only in B\n";
  out << (!diff.same()                       ? "The checkpoints differ.\n"
          : counts[EntryDiff::Status::close] ? "The checkpoints are equal within rtol and atol.\n"
                                             : "The checkpoints are equal.\n");
}

}  // namespace zoo::ckpt
