// Implementation of models/common/relative_position.h.
#include "models/common/relative_position.h"

#include <cmath>

namespace zoo::models {

torch::Tensor relative_position_bucket(const torch::Tensor& relative_position, bool bidirectional, int64_t buckets,
                                       int64_t max_distance) {
  torch::Tensor bucket = torch::zeros_like(relative_position);
  torch::Tensor distance;
  if (bidirectional) {
    buckets /= 2;
    bucket = bucket + (relative_position > 0).to(bucket.scalar_type()) * buckets;
    distance = relative_position.abs();
  } else {
    distance = -torch::clamp_max(relative_position, 0);  // keys before the query; later ones count as 0
  }
  const int64_t max_exact = buckets / 2;
  // log-spaced buckets from max_exact to max_distance (computed in float, truncated as modelzoo's .to(long))
  torch::Tensor large = max_exact + (torch::log(distance.to(torch::kFloat) / double(max_exact)) /
                                     std::log(double(max_distance) / double(max_exact)) * double(buckets - max_exact))
                                        .to(bucket.scalar_type());
  large = torch::clamp_max(large, buckets - 1);
  return bucket + torch::where(distance < max_exact, distance, large);
}

RelativePositionBiasImpl::RelativePositionBiasImpl(int64_t heads, int64_t buckets, bool bidirectional,
                                                   const torch::TensorOptions& p, int64_t max_distance)
    : buckets_(buckets), max_distance_(max_distance), bidirectional_(bidirectional) {
  relative_attention_bias = register_module("relative_attention_bias", EmbeddingTable(buckets, heads, p));
}

torch::Tensor RelativePositionBiasImpl::forward(int64_t queries, int64_t keys, int64_t first_query) {
  auto longs = torch::dtype(torch::kLong).device(relative_attention_bias->weight.device());
  const torch::Tensor query_position = torch::arange(first_query, first_query + queries, longs).unsqueeze(1);
  const torch::Tensor key_position = torch::arange(keys, longs).unsqueeze(0);
  const torch::Tensor bucket =
      relative_position_bucket(key_position - query_position, bidirectional_, buckets_, max_distance_);
  return relative_attention_bias(bucket).permute({2, 0, 1});  // (queries, keys, heads) -> (heads, queries, keys)
}

}  // namespace zoo::models
