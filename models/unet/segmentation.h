// Segmentation losses and eval metrics, as modelzoo's UNet computes them.
// Defines: segmentation_loss, dice_ce_loss, segmentation_metrics.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "models/model.h"

namespace zoo::models {

// `loss`: bce (one logit map, labels 0/1 float), multilabel_bce (one-hot
// labels), ssce (cross entropy over class maps, labels class ids), or
// ssce_dice (modelzoo's DiceCELoss: 0.5 ce + 0.5 (1 - dice), the background
// class left out of the dice unless include_background). Scalar float32.
torch::Tensor segmentation_loss(const std::string& loss, const torch::Tensor& logits, const torch::Tensor& labels,
                                int64_t num_classes, bool include_background);

// modelzoo's Dice term: softmax over classes, one-hot labels, per (sample,
// class) 2 |p t| / (|p| + |t| + 1e-6), averaged, times C / (C - 1) without
// the background class.
torch::Tensor dice_ce_loss(const torch::Tensor& logits, const torch::Tensor& labels, int64_t num_classes,
                           bool include_background);

// Eval metrics from the confusion matrix of predicted against true classes
// (predictions: logit > 0 for one logit map, else the argmax over classes):
// mean_iou (mIOU) and dice_coefficient (DSC) macro-averaged over the classes
// that occur and are not in `ignore_classes`; accuracy (Acc) over pixels.
std::map<std::string, MetricTerm> segmentation_metrics(const torch::Tensor& logits, const torch::Tensor& labels,
                                                       const std::string& loss, int64_t num_classes,
                                                       const std::vector<std::string>& which,
                                                       const std::vector<int64_t>& ignore_classes);

}  // namespace zoo::models
