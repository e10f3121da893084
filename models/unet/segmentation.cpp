// Implementation of models/unet/segmentation.h.
#include "models/unet/segmentation.h"

#include <algorithm>
#include <stdexcept>

namespace zoo::models {

namespace {

// Losses in float32 (float64 stays), whatever precision the model runs in.
torch::Tensor at_least_float(const torch::Tensor& x) {
  return x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
}

// (B, ...) class ids -> (B, C, ...) int64 one-hot.
torch::Tensor one_hot_channels(const torch::Tensor& ids, int64_t num_classes) {
  torch::Tensor h = torch::one_hot(ids.to(torch::kLong), num_classes);
  std::vector<int64_t> order = {0, h.dim() - 1};
  for (int64_t d = 1; d < h.dim() - 1; ++d) order.push_back(d);
  return h.permute(order);
}

}  // namespace

torch::Tensor dice_ce_loss(const torch::Tensor& logits, const torch::Tensor& labels, int64_t C,
                           bool include_background) {
  const torch::Tensor x = at_least_float(logits);
  const torch::Tensor ce = torch::cross_entropy_loss(x, labels.to(torch::kLong));
  torch::Tensor p = torch::softmax(x, 1), t = one_hot_channels(labels, C).to(x.scalar_type());
  if (!include_background) {
    if (C < 2) throw std::invalid_argument("ssce_dice without the background class needs more than one class");
    torch::Tensor keep = torch::ones({C}, x.options());
    keep[0] = 0;
    std::vector<int64_t> shape(x.dim(), 1);
    shape[1] = C;
    keep = keep.view(shape);
    p = p * keep, t = t * keep;
  }
  std::vector<int64_t> space;
  for (int64_t d = 2; d < x.dim(); ++d) space.push_back(d);
  const torch::Tensor dice = 2.0 * (p * t).sum(space) / (t.sum(space) + p.sum(space) + 1e-6);
  const double correction = include_background ? 1.0 : double(C) / double(C - 1);
  return 0.5 * ce + 0.5 * (1.0 - correction * dice.mean());
}

torch::Tensor segmentation_loss(const std::string& loss, const torch::Tensor& logits, const torch::Tensor& labels,
                                int64_t num_classes, bool include_background) {
  const torch::Tensor x = at_least_float(logits);
  if (loss == "bce" || loss == "multilabel_bce")
    return torch::binary_cross_entropy_with_logits(x, labels.to(x.scalar_type()));
  if (loss == "ssce") return torch::cross_entropy_loss(x, labels.to(torch::kLong));
  if (loss == "ssce_dice") return dice_ce_loss(x, labels, num_classes, include_background);
  throw std::invalid_argument("unknown segmentation loss '" + loss + "'");
}

std::map<std::string, MetricTerm> segmentation_metrics(const torch::Tensor& logits, const torch::Tensor& labels,
                                                       const std::string& loss, int64_t C,
                                                       const std::vector<std::string>& which,
                                                       const std::vector<int64_t>& ignore_classes) {
  torch::NoGradGuard no_grad;
  // modelzoo thresholds the raw logit at 0.5 (a probability of 0.62); zoo at 0 (0.5), see the README.
  const torch::Tensor predicted = logits.size(1) == 1 ? (logits.squeeze(1) > 0).to(torch::kLong) : logits.argmax(1);
  torch::Tensor truth = loss == "multilabel_bce" ? labels.argmax(1)
                        : loss == "bce"          ? labels.squeeze(1).round()
                                                 : labels;
  truth = truth.to(torch::kLong).reshape(predicted.sizes());
  // Rows: true class, columns: predicted class.
  const torch::Tensor confusion =
      torch::bincount((truth * C + predicted).reshape({-1}), {}, C * C).to(torch::kDouble).view({C, C});
  torch::Tensor counted = torch::ones({C}, confusion.options());
  for (int64_t c : ignore_classes)
    if (c >= 0 && c < C) counted[c] = 0;
  const torch::Tensor hits = confusion.diagonal() * counted;
  const torch::Tensor truth_total = confusion.sum(1), predicted_total = confusion.sum(0);
  std::map<std::string, MetricTerm> out;
  auto wants = [&](const char* name) { return std::find(which.begin(), which.end(), name) != which.end(); };
  if (wants("mIOU"))
    out["mean_iou"] = {hits, (truth_total + predicted_total - hits) * counted, MetricTerm::Reduce::macro_mean};
  if (wants("DSC"))
    out["dice_coefficient"] = {2 * hits, (truth_total + predicted_total) * counted, MetricTerm::Reduce::macro_mean};
  if (wants("Acc"))
    out["accuracy"] = {confusion.diagonal().sum(), torch::tensor(double(truth.numel()), torch::kDouble),
                       MetricTerm::Reduce::mean};
  return out;
}

}  // namespace zoo::models
