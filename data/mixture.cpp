// Implementation of data/mixture.h.
#include "data/mixture.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

namespace zoo::data {

const config::Schema<MixtureEntry>& MixtureEntry::schema() {
  using M = MixtureEntry;
  static const config::Schema<M> s =
      config::Schema<M>("mixture item", "One data set of a mixture and its share.")
          .field("data_dir", &M::data_dir, "Directory (or list) of *.h5 files.")
          .field("weight", &M::weight, "Share of the samples (weights are normalized to sum to 1).",
                 config::non_negative<double>())
          .field("data_subset", &M::data_subset,
                 "Only these ranges of the data set's samples, e.g. \"0.0-0.5\" or \"0.1-0.3,0.7-1.0\".")
          .validate([](const M& m, const auto& fail) {
            try {
              if (m.data_subset) parse_data_subset(*m.data_subset);
            } catch (const std::invalid_argument& e) {
              fail("data_subset", e.what());
            }
          });
  return s;
}

MixtureSource::MixtureSource(std::vector<std::shared_ptr<LmSampleSource>> sources, std::vector<double> weights,
                             bool interleave, uint64_t seed) {
  if (sources.size() != weights.size() || sources.empty())
    throw std::invalid_argument("a mixture needs one weight per data set");
  double sum = 0;
  std::vector<double> kept;
  for (size_t k = 0; k < sources.size(); ++k) {
    if (weights[k] < 0) throw std::invalid_argument("mixture weights must be >= 0");
    if (weights[k] == 0) continue;
    if (sources[k]->sequence_length() != sources.front()->sequence_length())
      throw std::invalid_argument(
          sources[k]->describe() + " has samples of " + std::to_string(sources[k]->sequence_length()) + " tokens, " +
          sources.front()->describe() + " of " + std::to_string(sources.front()->sequence_length()));
    sources_.push_back(sources[k]);
    kept.push_back(weights[k]);
    sum += weights[k];
  }
  if (sources_.empty()) throw std::invalid_argument("at least one mixture weight must be > 0");
  // An epoch sees every sample of each source weighing > 5% at least once (all of them when none does).
  double total = 0;
  for (size_t k = 0; k < sources_.size(); ++k)
    if (kept[k] / sum > 0.05 || std::none_of(kept.begin(), kept.end(), [&](double w) { return w / sum > 0.05; }))
      total = std::max(total, double(sources_[k]->num_samples()) / (kept[k] / sum));
  boundaries_ = {0};
  for (size_t k = 0; k < sources_.size(); ++k)
    boundaries_.push_back(boundaries_.back() + int64_t(total * (kept[k] / sum)));
  if (boundaries_.back() == 0) throw std::invalid_argument("the mixture has no samples");
  if (!interleave) return;
  // Shuffle the positions, then give each source's positions back in order:
  // sources are mixed while each one's samples keep their order (sequential reads).
  order_.resize(size_t(boundaries_.back()));
  std::iota(order_.begin(), order_.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order_.begin(), order_.end(), rng);
  std::vector<int64_t> next(boundaries_.begin(), boundaries_.end() - 1);
  for (int64_t& v : order_) {
    const size_t k = size_t(std::upper_bound(boundaries_.begin(), boundaries_.end(), v) - boundaries_.begin() - 1);
    v = next[k]++;
  }
}

std::pair<size_t, int64_t> MixtureSource::place(int64_t i) const {
  if (i < 0 || i >= num_samples()) throw std::out_of_range("mixture index " + std::to_string(i) + " out of range");
  const int64_t at = order_.empty() ? i : order_[size_t(i)];
  const size_t k = size_t(std::upper_bound(boundaries_.begin(), boundaries_.end(), at) - boundaries_.begin() - 1);
  return {k, (at - boundaries_[k]) % sources_[k]->num_samples()};
}

void MixtureSource::read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const {
  const auto [k, sample] = place(i);
  sources_[k]->read(sample, input_ids, mask, labels);
}

void MixtureSource::read_packing(int64_t i, int32_t* attention_span, int32_t* position_ids) const {
  const auto [k, sample] = place(i);
  sources_[k]->read_packing(sample, attention_span, position_ids);
}

std::string MixtureSource::describe() const {
  return "a mixture of " + std::to_string(sources_.size()) + " data sets (" + sources_.front()->describe() + ", ...)";
}

std::string MixtureSource::locate(int64_t i) const {
  const auto [k, sample] = place(i);
  return sources_[k]->locate(sample);
}

std::vector<std::pair<double, double>> parse_data_subset(const std::string& text) {
  std::vector<std::pair<double, double>> ranges;
  std::stringstream items(text);
  double previous_end = 0;
  for (std::string item; std::getline(items, item, ',');) {
    const size_t dash = item.find('-', item.find_first_not_of(" "));
    double a = 0, b = 0;
    try {
      if (dash == std::string::npos) throw std::invalid_argument("no dash");
      size_t used_a = 0, used_b = 0;
      a = std::stod(item.substr(0, dash), &used_a);
      b = std::stod(item.substr(dash + 1), &used_b);
      if (item.find_first_not_of(" ", dash + 1 + used_b) != std::string::npos) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw std::invalid_argument("\"" + text +
                                  "\" is not comma-separated ranges of fractions such as \"0.0-0.5\" or "
                                  "\"0.1-0.3,0.7-1.0\"");
    }
    if (a < 0 || b > 1 || b < a)
      throw std::invalid_argument("range " + item + " is not within [0, 1] with its start at most its end");
    if (a < previous_end) throw std::invalid_argument("range " + item + " starts before the previous range ends");
    previous_end = b;
    ranges.emplace_back(a, b);
  }
  if (ranges.empty()) throw std::invalid_argument("no ranges given");
  return ranges;
}

SubsetSource::SubsetSource(std::shared_ptr<LmSampleSource> source, const std::vector<std::pair<double, double>>& ranges)
    : source_(std::move(source)) {
  const double n = double(source_->num_samples());
  int64_t kept = 0;
  for (const auto& [a, b] : ranges) {
    const int64_t first = int64_t(n * a), end = int64_t(n * b);  // truncated, as modelzoo's int()
    if (end <= first) continue;
    firsts_.push_back(first);
    ends_.push_back(kept += end - first);
    text_ += (text_.empty() ? "" : ",") + std::to_string(a) + "-" + std::to_string(b);
  }
}

int64_t SubsetSource::source_index(int64_t i) const {
  if (i < 0 || i >= num_samples()) throw std::out_of_range("subset index " + std::to_string(i) + " out of range");
  const size_t r = size_t(std::upper_bound(ends_.begin(), ends_.end(), i) - ends_.begin());
  return firsts_[r] + i - (r == 0 ? 0 : ends_[r - 1]);
}

void SubsetSource::read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const {
  source_->read(source_index(i), input_ids, mask, labels);
}

std::string SubsetSource::describe() const { return source_->describe() + " (data_subset " + text_ + ")"; }

}  // namespace zoo::data
