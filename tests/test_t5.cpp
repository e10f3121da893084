// T5 and the encoder-decoder Transformer (modelzoo's t5 / transformer models)
// with their text processors: T5's relative position buckets, both models'
// logits against a float64 forward written op by op from modelzoo's math,
// the loss under each mlm_loss_scaling, span corruption as modelzoo's
// T5DynamicDataProcessor does it, translation pairs as its
// TransformerDynamicDataProcessor reads them, and training from legacy configs.
#include <fnmatch.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "data/loader.h"
#include "data/processors/seq2seq_text.h"
#include "models/t5/t5.h"
#include "runner/params/params.h"
#include "runner/run.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

using torch::indexing::Slice;

// T5's bucket of a relative position, from the paper's description: exact
// below half the buckets (of one direction), then log-spaced up to max_distance.
int64_t reference_bucket(int64_t relative, bool bidirectional, int64_t buckets, int64_t max_distance) {
  int64_t offset = 0, n = -relative;  // n: how far the key lies before the query
  if (bidirectional) {
    buckets /= 2;
    if (relative > 0) offset = buckets;
    n = std::abs(relative);
  } else if (n < 0) {
    n = 0;
  }
  const int64_t exact = buckets / 2;
  if (n < exact) return offset + n;
  const int64_t large = exact + static_cast<int64_t>(std::log(double(n) / exact) /
                                                     std::log(double(max_distance) / exact) * double(buckets - exact));
  return offset + std::min(large, buckets - 1);
}

models::T5Options tiny_t5() {
  models::T5Options o;
  o.src_vocab_size = 20;
  o.extra_ids = 3;
  o.d_model = 8;
  o.d_kv = 3;  // d_kv * num_heads != d_model, as T5 allows
  o.num_heads = 2;
  o.d_ff = 12;
  o.encoder_num_hidden_layers = 2;
  o.decoder_num_hidden_layers = 2;
  o.relative_attention_num_buckets = 8;
  o.dropout_rate = 0.0;
  return o;
}

// The original Transformer's keys (modelzoo's transformer_base, shrunk).
models::T5Options tiny_transformer() {
  models::T5Options o = tiny_t5();
  o.extra_ids = 0;
  o.d_kv = 4;
  o.position_embedding_type = "fixed";
  o.src_max_position_embeddings = 6;
  o.tgt_max_position_embeddings = 5;
  o.norm_type = "layernorm";
  o.use_pre_encoder_decoder_layer_norm = false;
  o.use_ffn_bias = true;
  o.use_transformer_initialization = true;
  o.share_encoder_decoder_embedding = false;
  o.share_embedding_weights = false;
  o.encoder_nonlinearity = o.decoder_nonlinearity = "relu";
  return o;
}

// float64 T5ForConditionalGeneration written out op by op from modelzoo's
// code, reading the model's parameters by their modelzoo names.
struct ReferenceT5 {
  const models::T5Options& o;
  std::map<std::string, torch::Tensor> p;

  torch::Tensor w(const std::string& name) const {
    auto it = p.find(name);
    if (it == p.end()) throw std::runtime_error("no parameter " + name);
    return it->second;
  }
  torch::Tensor norm(const torch::Tensor& x, const std::string& at) const {
    if (o.norm_type == "rmsnorm")
      return x / torch::sqrt((x * x).mean(-1, true) + o.layer_norm_epsilon) * w(at + ".weight");
    const torch::Tensor mean = x.mean(-1, true), var = ((x - mean) * (x - mean)).mean(-1, true);
    return (x - mean) / torch::sqrt(var + o.layer_norm_epsilon) * w(at + ".weight") + w(at + ".bias");
  }
  torch::Tensor linear(const torch::Tensor& x, const std::string& at, bool bias) const {
    torch::Tensor y = torch::matmul(x, w(at + ".weight").t());
    return bias ? y + w(at + ".bias") : y;
  }
  // (H, Tq, Tk) position bias of a stack's relative_attention_bias table.
  torch::Tensor relative_bias(const std::string& embeddings, int64_t Tq, int64_t Tk, bool bidirectional) const {
    const torch::Tensor table = w(embeddings + ".position_embed_helper.relative_attention_bias.weight");
    torch::Tensor bias = torch::zeros({o.num_heads, Tq, Tk}, torch::kDouble);
    for (int64_t i = 0; i < Tq; ++i)
      for (int64_t j = 0; j < Tk; ++j)
        bias.index_put_({Slice(), i, j},
                        table[reference_bucket(j - i, bidirectional, o.relative_attention_num_buckets, 128)]);
    return bias;
  }
  // muP's width multiplier, and its projection scales (modelzoo's q/k/v_projection_scale w^-1/2, output w^1/2).
  double width() const { return o.mup() ? double(o.d_model) / double(*o.mup_base_d_model) : 1.0; }
  double projection_scale() const { return o.mup() && !o.mup_base_d_kv ? std::pow(width(), -0.5) : 1.0; }
  torch::Tensor attention(const torch::Tensor& x, const torch::Tensor& kv, const std::string& at,
                          const torch::Tensor& key_padding, bool causal, const torch::Tensor& bias,
                          bool decoder) const {
    const int64_t B = x.size(0), T = x.size(1), S = kv.size(1), H = o.num_heads, D = o.d_kv;
    const bool b = o.use_projection_bias_in_attention;
    const double s = projection_scale();
    auto heads = [&](const torch::Tensor& t, int64_t n) { return t.view({B, n, H, D}).transpose(1, 2); };
    const torch::Tensor q = heads(linear(x, at + ".proj_q_dense_layer", b) * s, T);
    const torch::Tensor k = heads(linear(kv, at + ".proj_k_dense_layer", b) * s, S);
    const torch::Tensor v = heads(linear(kv, at + ".proj_v_dense_layer", b) * s, S);
    torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2));
    if (o.use_transformer_initialization || o.mup_base_d_model) {
      const bool by_d = (decoder ? o.scale_decoder_qk_dot_by_d : o.scale_encoder_qk_dot_by_d).value_or(false);
      scores = scores / (by_d ? double(D) : std::sqrt(double(D)));
    }
    scores = scores * (decoder ? o.decoder_attention_logits_alpha : o.encoder_attention_logits_alpha);
    if (bias.defined()) scores = scores + bias;
    torch::Tensor hidden = torch::zeros({B, 1, T, S}, torch::kBool);
    if (causal) hidden = hidden | torch::ones({T, S}, torch::kBool).triu(1);
    if (key_padding.defined()) hidden = hidden | (key_padding == 0).view({B, 1, 1, S});
    scores = scores.masked_fill(hidden, -std::numeric_limits<double>::infinity());
    const torch::Tensor y = torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({B, T, H * D});
    return linear(y, at + ".proj_output_dense_layer", false) / s;
  }
  torch::Tensor ffn(const torch::Tensor& x, const std::string& at) const {
    return linear(torch::relu(linear(x, at + ".ffn.0.linear_layer", o.use_ffn_bias)), at + ".ffn.1.linear_layer",
                  o.use_ffn_bias);
  }
  // Post-norm: norm(x + f(x)); pre-norm: x + f(norm(x)).
  torch::Tensor residual(const torch::Tensor& x, const std::string& norm_at,
                         const std::function<torch::Tensor(const torch::Tensor&)>& f) const {
    return o.use_pre_encoder_decoder_layer_norm ? x + f(norm(x, norm_at)) : norm(x + f(x), norm_at);
  }
  torch::Tensor embed(const std::string& embeddings, const torch::Tensor& ids) const {
    const std::string table = o.share_encoder_decoder_embedding ? "encoder_embeddings" : embeddings;
    torch::Tensor h = w(table + ".word_embeddings.weight").index({ids});
    if (o.position_embedding_type == "fixed") {  // tensor2tensor's: timescales 1 .. 1e4, sin and cos interleaved
      const int64_t T = ids.size(1), n = o.d_model / 2;
      torch::Tensor table_pe = torch::zeros({T, 2 * n}, torch::kDouble);
      for (int64_t pos = 0; pos < T; ++pos)
        for (int64_t k = 0; k < n; ++k) {
          const double angle = pos * std::exp(-std::log(1.0e4) * double(k) / double(n - 1));
          table_pe[pos][2 * k] = std::sin(angle);
          table_pe[pos][2 * k + 1] = std::cos(angle);
        }
      h = h + table_pe;
    }
    return h * o.embeddings_alpha * (o.mup() ? std::sqrt(double(o.d_model)) : 1.0);
  }
  torch::Tensor logits(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& tgt) const {
    const bool relative = o.position_embedding_type == "relative";
    const int64_t S = src.size(1), T = tgt.size(1);
    const torch::Tensor enc_bias = relative ? relative_bias("encoder_embeddings", S, S, true) : torch::Tensor();
    torch::Tensor h = embed("encoder_embeddings", src);
    for (int64_t l = 0; l < o.encoder_num_hidden_layers; ++l) {
      const std::string at = "encoder.layers." + std::to_string(l);
      h = residual(h, at + ".norm1", [&](const torch::Tensor& x) {
        return attention(x, x, at + ".self_attn", src_mask, false, enc_bias, false);
      });
      h = residual(h, at + ".norm2", [&](const torch::Tensor& x) { return ffn(x, at + ".ffn"); });
    }
    const torch::Tensor memory = norm(h, "encoder.norm");
    const torch::Tensor dec_bias = relative ? relative_bias("decoder_embeddings", T, T, false) : torch::Tensor();
    torch::Tensor d = embed("decoder_embeddings", tgt);
    for (int64_t l = 0; l < o.decoder_layers(); ++l) {
      const std::string at = "decoder.layers." + std::to_string(l);
      d = residual(d, at + ".norm1", [&](const torch::Tensor& x) {
        return attention(x, x, at + ".self_attn", {}, true, dec_bias, true);
      });
      d = residual(d, at + ".norm2", [&](const torch::Tensor& x) {
        return attention(x, memory, at + ".multihead_attn", src_mask, false, {}, true);
      });
      d = residual(d, at + ".norm3", [&](const torch::Tensor& x) { return ffn(x, at + ".ffn"); });
    }
    d = norm(d, "decoder.norm");
    if (o.mup()) {
      const double scale =
          o.output_logits_alpha.value_or(1.0) / (o.scale_output_logits_by_d ? width() : std::sqrt(width()));
      return torch::matmul(d, w("encoder_embeddings.word_embeddings.weight").t()) * scale;  // (shared and tied here)
    }
    if (o.share_embedding_weights) {
      const std::string table = o.share_encoder_decoder_embedding ? "encoder_embeddings" : "decoder_embeddings";
      return torch::matmul(d * std::pow(double(o.d_model), -0.5), w(table + ".word_embeddings.weight").t());
    }
    return torch::matmul(d, w("lm_head.weight").t());
  }
};

void expect_reference_logits(const models::T5Options& o) {
  torch::manual_seed(11);
  models::T5Model model(o, torch::dtype(torch::kDouble));
  model.reset_parameters();
  model.eval();
  ReferenceT5 ref{o, {}};
  for (const auto& kv : model.named_parameters()) ref.p[kv.key()] = kv.value().detach();
  const int64_t V = o.source_vocab();
  const torch::Tensor src = torch::randint(0, V, {2, 6}, torch::kLong),
                      tgt = torch::randint(0, V, {2, 5}, torch::kLong);
  const torch::Tensor src_mask = torch::tensor({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, torch::kLong).view({2, 6});
  torch::NoGradGuard no_grad;
  const torch::Tensor got = model.logits(src, src_mask, tgt), want = ref.logits(src, src_mask, tgt);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(torch::allclose(got, want, 1e-10, 1e-10)) << (got - want).abs().max();
  // Padding in the source changes nothing at the unpadded positions' keys: the second row ignores tokens 4 and 5.
  torch::Tensor other = src.clone();
  other[1][4] = (src[1][4].item<int64_t>() + 1) % V;
  EXPECT_TRUE(torch::allclose(model.logits(other, src_mask, tgt)[1], got[1], 1e-12, 1e-12));
}

// Vocabulary: <pad> 0, <unk> 1, <s> 2, </s> 3, then words w4 .. w11.
std::string write_vocab(const TempDir& dir) {
  std::string v = "<pad>\n<unk>\n<s>\n</s>\n";
  for (int i = 4; i < 12; ++i) v += "w" + std::to_string(i) + "\n";
  return zoo::testing::write_file(dir / "vocab.txt", v);
}

}  // namespace

// Relative positions fall in T5's buckets: exact for near keys, logarithmic
// beyond, and (for the decoder) keys after the query in bucket 0.
TEST(T5, RelativePositionBuckets) {
  const torch::Tensor rel = torch::arange(-300, 301, torch::kLong);
  for (bool bidirectional : {true, false})
    for (int64_t buckets : {8, 32}) {
      const torch::Tensor got = models::relative_position_bucket(rel, bidirectional, buckets, 128);
      for (int64_t i = 0; i < rel.size(0); ++i)
        ASSERT_EQ(got[i].item<int64_t>(), reference_bucket(rel[i].item<int64_t>(), bidirectional, buckets, 128))
            << "relative " << rel[i].item<int64_t>() << " bidirectional " << bidirectional << " buckets " << buckets;
    }
  // Values T5's paper setting gives (32 buckets, 128 max distance).
  auto bucket = [](int64_t r, bool bi) {
    return models::relative_position_bucket(torch::tensor({r}), bi, 32, 128)[0].item<int64_t>();
  };
  EXPECT_EQ(bucket(0, true), 0);
  EXPECT_EQ(bucket(-1, true), 1);
  EXPECT_EQ(bucket(1, true), 17);
  EXPECT_EQ(bucket(-20, true), 10);
  EXPECT_EQ(bucket(500, true), 31);
  EXPECT_EQ(bucket(3, false), 0);
  EXPECT_EQ(bucket(-20, false), 17);
  EXPECT_EQ(bucket(-1000, false), 31);
}

// T5 (relative bias, RMSNorm, pre-norm, unscaled scores, shared and tied
// embeddings, sentinels) and the Transformer (sinusoids, post-norm
// LayerNorm, scaled scores, FFN biases, separate tables and head) give the
// logits of the op-by-op float64 forward.
TEST(T5, LogitsMatchTheReferenceForward) {
  SCOPED_TRACE("t5");
  expect_reference_logits(tiny_t5());
  models::T5Options glu = tiny_t5();
  glu.use_projection_bias_in_attention = true;
  glu.decoder_num_hidden_layers = 1;
  SCOPED_TRACE("t5 with projection biases, 1 decoder layer");
  expect_reference_logits(glu);
  SCOPED_TRACE("transformer");
  expect_reference_logits(tiny_transformer());
  // T5's muP (modelzoo's t5_11B_muP keys): embeddings and logits scaled, scores by 1/d_kv times alpha and by 1/w
  // through the projections' scales.
  models::T5Options mup = tiny_t5();
  mup.mup_base_d_model = 4;
  mup.mup_base_d_ff = 6;
  mup.embeddings_alpha = 1.5;
  mup.encoder_attention_logits_alpha = 2.0;
  mup.decoder_attention_logits_alpha = 0.5;
  mup.scale_encoder_qk_dot_by_d = true;
  mup.output_logits_alpha = 2.2;
  SCOPED_TRACE("t5 with muP");
  expect_reference_logits(mup);
}

// muP's learning-rate groups hold the parameters modelzoo's patterns name,
// scaled by the width multipliers: w = d_model / mup_base_d_model = 2 and
// mup_base_d_ff / d_ff = 1/2.
TEST(T5, MupLearningRateGroups) {
  models::T5Options o = tiny_t5();
  o.mup_base_d_model = 4;
  o.mup_base_d_ff = 24;
  models::T5Model m(o, torch::dtype(torch::kDouble));
  const auto groups = m.lr_adjustment_groups();
  auto count = [&](const std::string& group) {
    int64_t n = 0;
    for (const auto& kv : m.named_parameters())
      for (const auto& pattern : groups.at(group).patterns) n += fnmatch(pattern.c_str(), kv.key().c_str(), 0) == 0;
    return n;
  };
  EXPECT_EQ(count("encoder_qkv_projection"), 2 * 3);      // 2 layers' q, k, v
  EXPECT_EQ(count("decoder_qkv_projection"), 2 * 2 * 3);  // self and cross attention
  EXPECT_EQ(count("decoder_output_projection"), 2 * 2);
  EXPECT_EQ(count("encoder_input_ffn"), 2);
  EXPECT_EQ(count("decoder_output_ffn"), 2);
  EXPECT_EQ(count("embedding"), 3);  // the shared words and the two relative bias tables
  EXPECT_EQ(count("lm_head"), 0);    // tied
  EXPECT_DOUBLE_EQ(groups.at("embedding").scale, 1 / std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(groups.at("encoder_input_ffn").scale, 0.5);
  EXPECT_DOUBLE_EQ(groups.at("decoder_qkv_projection").scale, 1 / std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(groups.at("encoder_output_ffn").scale, 2.0);
}

// The loss is modelzoo's T5ForConditionalGenerationLoss under each
// mlm_loss_scaling, over decoder_attention_mask; eval reports accuracy_lm
// and perplexity_lm over the target tokens.
TEST(T5, LossFollowsMlmLossScaling) {
  models::T5Options o = tiny_t5();
  o.lm_loss_weight = 0.25;
  torch::manual_seed(5);
  const int64_t V = o.source_vocab();
  const torch::Tensor src = torch::randint(0, V, {2, 6}, torch::kLong),
                      tgt = torch::randint(0, V, {2, 5}, torch::kLong);
  const torch::Tensor labels = torch::randint(0, V, {2, 5}, torch::kLong);
  const torch::Tensor tgt_mask = torch::tensor({1, 1, 1, 1, 1, 1, 1, 0, 0, 0}, torch::kLong).view({2, 5});
  models::Features batch{{"input_ids", src},
                         {"attention_mask", torch::ones({2, 6}, torch::kLong)},
                         {"decoder_input_ids", tgt},
                         {"decoder_attention_mask", tgt_mask},
                         {"labels", labels}};
  // (the cross-entropy is computed in float32 whatever the logits' dtype: tolerances of 1e-6)
  auto loss_of = [&](const std::string& scaling, bool training, const models::Features& b, double smoothing = 0) {
    models::T5Options with = o;
    with.mlm_loss_scaling = scaling;
    with.label_smoothing = smoothing;
    torch::manual_seed(1);
    models::T5Model m(with, torch::dtype(torch::kDouble));
    m.reset_parameters();
    m.train(training);
    return m.forward(b, !training);
  };
  torch::manual_seed(1);
  models::T5Model m(o, torch::dtype(torch::kDouble));
  m.reset_parameters();
  m.eval();
  const torch::Tensor logp = torch::log_softmax(m.logits(src, batch.at("attention_mask"), tgt).detach(), -1);
  double sum = 0, correct = 0, smoothed = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 5; ++t)
      if (tgt_mask[b][t].item<int64_t>()) {
        sum -= logp[b][t][labels[b][t].item<int64_t>()].item<double>();
        smoothed -=
            0.9 * logp[b][t][labels[b][t].item<int64_t>()].item<double>() + 0.1 * logp[b][t].mean().item<double>();
        correct += logp[b][t].argmax().item<int64_t>() == labels[b][t].item<int64_t>();
      }
  const double tokens = 7;
  EXPECT_NEAR(loss_of("num_masked", true, batch).loss.item<double>(), sum / tokens, 1e-6);
  EXPECT_NEAR(loss_of("batch_size", true, batch).loss.item<double>(), sum / 2 * 0.25, 1e-6);
  // label_smoothing: (1 - s) CE + s * the mean over the vocabulary of -log p, in training only
  EXPECT_NEAR(loss_of("num_masked", true, batch, 0.1).loss.item<double>(), smoothed / tokens, 1e-6);
  EXPECT_NEAR(loss_of("num_masked", false, batch, 0.1).loss.item<double>(), sum / tokens, 1e-6);
  // precomputed_num_masked: the batch's loss_weight; in training without one, what
  // modelzoo's dynamic_loss_weight would give (2 / 7); in eval, batch_size's.
  models::Features weighted = batch;
  weighted["loss_weight"] = torch::full({2, 1}, 0.5, torch::kFloat);
  EXPECT_NEAR(loss_of("precomputed_num_masked", true, weighted).loss.item<double>(), sum * 0.5 / 2, 1e-6);
  EXPECT_NEAR(loss_of("precomputed_num_masked", true, batch).loss.item<double>(), sum / tokens, 1e-6);
  const models::ModelOutput eval = loss_of("precomputed_num_masked", false, batch);
  EXPECT_NEAR(eval.loss.item<double>(), sum / 2 * 0.25, 1e-6);
  EXPECT_DOUBLE_EQ(eval.metrics.at("accuracy_lm").sum.item<double>(), correct);
  EXPECT_DOUBLE_EQ(eval.metrics.at("accuracy_lm").count.item<double>(), tokens);
  EXPECT_NEAR(eval.metrics.at("perplexity_lm").sum.item<double>(), sum, 1e-5);
}

// activation_checkpointing (zoo's own key) recomputes each encoder and
// decoder layer in the backward pass: the same loss and gradients, dropout
// replayed, the position biases and the encoder's output (inputs of every
// recomputed layer) back-propagated once.
TEST(T5, ActivationCheckpointingGivesTheSameGradients) {
  for (models::T5Options o : {tiny_t5(), tiny_transformer()}) {
    o.dropout_rate = 0.1;
    const int64_t V = o.source_vocab();
    torch::manual_seed(2);
    const models::Features batch{{"input_ids", torch::randint(0, V, {2, 6}, torch::kLong)},
                                 {"attention_mask", torch::tensor({1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}).view({2, 6})},
                                 {"decoder_input_ids", torch::randint(0, V, {2, 5}, torch::kLong)},
                                 {"decoder_attention_mask", torch::ones({2, 5}, torch::kLong)},
                                 {"labels", torch::randint(0, V, {2, 5}, torch::kLong)}};
    auto run = [&](bool recompute) {
      models::T5Options with = o;
      with.activation_checkpointing = recompute;
      torch::manual_seed(3);
      models::T5Model m(with, torch::dtype(torch::kDouble));
      m.reset_parameters();
      return zoo::testing::step_gradients(m, batch, 9);
    };
    const zoo::testing::StepGradients recomputed = run(true);
    zoo::testing::expect_same_step(run(false), recomputed, 1e-12, 1e-10, 1e-12);
    if (o.position_embedding_type == "relative")
      EXPECT_GT(recomputed.grads.at("encoder_embeddings.position_embed_helper.relative_attention_bias.weight")
                    .abs()
                    .sum()
                    .item<double>(),
                0);
  }
}

// modelzoo's noise mask: round(15%) noise tokens (at least 1) in
// round(noise / 3) spans (at least 1), alternating from a kept span; and
// its span corruption: each noise span one sentinel in the input, each kept
// span one in the target, counting down from the vocabulary's end.
TEST(T5Data, SpanCorruptionAsModelzoo) {
  data::SplitMix64 rng{7};
  for (int64_t length : {1, 2, 3, 10, 17, 100, 568}) {
    const std::vector<bool> mask = data::random_spans_noise_mask(length, rng);
    ASSERT_EQ(static_cast<int64_t>(mask.size()), length);
    const int64_t n = std::max<int64_t>(length, 2);
    const int64_t noise = std::min<int64_t>(std::max<int64_t>(std::nearbyint(n * 0.15), 1), n - 1);
    const int64_t spans = std::max<int64_t>(std::nearbyint(noise / 3.0), 1);
    if (length < 2) continue;  // modelzoo pads to 2 and cuts back
    EXPECT_EQ(std::count(mask.begin(), mask.end(), true), noise) << length;
    EXPECT_FALSE(mask[0]) << length;
    int64_t starts = 0;
    for (int64_t i = 0; i < length; ++i) starts += mask[i] && (i == 0 || !mask[i - 1]);
    EXPECT_EQ(starts, spans) << length;
  }
  const std::vector<int64_t> tokens = {10, 11, 12, 13, 14, 15, 16, 17};
  const std::vector<bool> noise = {false, false, true, true, false, false, true, false};
  const data::DenoisingSample s = data::span_corruption(tokens, noise, 100, 2, 3);
  EXPECT_EQ(s.input_ids, (std::vector<int64_t>{10, 11, 99, 14, 15, 98, 17}));
  EXPECT_EQ(s.decoder_input_ids, (std::vector<int64_t>{2, 99, 12, 13, 98, 16, 97}));
  EXPECT_EQ(s.labels, (std::vector<int64_t>{99, 12, 13, 98, 16, 97, 3}));
  // The T5 configs' lengths: 568 raw tokens fill 512 source tokens, with targets of up to 114.
  EXPECT_EQ(data::raw_sequence_lengths(512), std::make_pair(int64_t(568), int64_t(114)));
}

// T5DynamicDataProcessor: documents from meta.dat's files cut into pieces,
// corrupted so that the input's sentinels and the target's spans give the
// piece back; a new corruption each epoch, the same for the same seed.
TEST(T5Data, ProcessorCorruptsEachPieceAnewEachEpoch) {
  TempDir dir;
  write_vocab(dir);
  std::string doc_a, doc_b = "w4 zz w5";  // zz is not in the vocabulary: <unk>
  for (int i = 0; i < 80; ++i) doc_a += "w" + std::to_string(4 + i % 8) + " ";
  zoo::testing::write_file(dir / "c4/part0.txt", doc_a + "\n" + doc_b + "\n\n");
  zoo::testing::write_file(dir / "c4/meta.dat", "part0.txt 3\n");
  auto section = [&](int64_t target_length) {
    return "{data_processor: T5DynamicDataProcessor, src_vocab_file: " + (dir / "vocab.txt") +
           ", src_data_dir: " + (dir / "c4") +
           ", extra_ids: 4, src_max_sequence_length: 32, "
           "tgt_max_sequence_length: " +
           std::to_string(target_length) +
           ", batch_size: 4, shuffle: false, "
           "shuffle_seed: 3}";
  };
  // 32 source tokens take pieces of 34 raw tokens (with two noise spans): doc_a gives 3 (34, 34, 12), doc_b 1, the
  // empty line none.
  auto loader = zoo::testing::open_loader(section(12));
  EXPECT_EQ(loader->batches_per_epoch(), 1);
  const models::Features first = loader->next();
  std::vector<std::vector<int64_t>> pieces(3);
  for (int i = 0; i < 80; ++i) pieces[static_cast<size_t>(i / 34)].push_back(4 + i % 8);
  pieces.push_back({4, 1, 5});
  const int64_t vocab = 12 + 4;
  for (int64_t b = 0; b < 4; ++b) {
    std::vector<int64_t> in, out;
    for (int64_t t = 0; t < 32; ++t)
      if (first.at("attention_mask")[b][t].item<int64_t>()) in.push_back(first.at("input_ids")[b][t].item<int64_t>());
      else EXPECT_EQ(first.at("input_ids")[b][t].item<int64_t>(), 0);  // <pad>
    for (int64_t t = 0; t < 12; ++t)
      if (first.at("decoder_attention_mask")[b][t].item<int64_t>())
        out.push_back(first.at("labels")[b][t].item<int64_t>());
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out.back(), 3) << "labels end with </s>";
    EXPECT_EQ(first.at("decoder_input_ids")[b][0].item<int64_t>(), 2) << "decoder input starts with <s>";
    out.pop_back();
    // Undo the corruption: each input sentinel stands for the target tokens after the same sentinel.
    std::map<int64_t, std::vector<int64_t>> spans;
    for (size_t i = 0, current = 0; i < out.size(); ++i)
      if (out[i] >= 12) current = static_cast<size_t>(out[i]), spans[out[i]];
      else spans[static_cast<int64_t>(current)].push_back(out[i]);
    std::vector<int64_t> restored;
    int64_t next_sentinel = vocab - 1;
    for (int64_t id : in) {
      if (id < 12) {
        restored.push_back(id);
        continue;
      }
      EXPECT_EQ(id, next_sentinel--) << "sentinels count down from the vocabulary's end";
      restored.insert(restored.end(), spans[id].begin(), spans[id].end());
    }
    EXPECT_EQ(restored, pieces[static_cast<size_t>(b)]) << "sample " << b;
  }
  const models::Features second = loader->next();  // the next epoch: the same pieces, corrupted anew
  EXPECT_FALSE(torch::equal(first.at("input_ids"), second.at("input_ids")));
  EXPECT_TRUE(torch::equal(zoo::testing::open_loader(section(12))->next().at("input_ids"), first.at("input_ids")));
  // A target length too short for the source's corruption (34 tokens give targets of up to 8) is named.
  const std::string error = zoo::testing::open_error(section(7));
  EXPECT_NE(error.find("train_input.tgt_max_sequence_length"), std::string::npos) << error;
  EXPECT_NE(error.find("targets of up to 8 tokens"), std::string::npos) << error;
}

// TransformerDynamicDataProcessor: meta.dat pairs source and target files;
// line i of one translates line i of the other; pairs that do not fit
// (modelzoo: 0 < length < max on each side) are skipped.
TEST(TransformerData, PairsLinesAndSkipsWhatDoesNotFit) {
  TempDir dir;
  write_vocab(dir);
  zoo::testing::write_file(dir / "wmt/train.en", "w4 w5\nw6 w7 w8 w9\nw10\n");
  zoo::testing::write_file(dir / "wmt/train.de", "w11 w10 w9\nw8\nw7 w6\n");
  zoo::testing::write_file(dir / "wmt/meta.dat", "train.en train.de 3\n");
  auto loader = zoo::testing::open_loader("{data_processor: TransformerDynamicDataProcessor, src_vocab_file: " +
                                          (dir / "vocab.txt") + ", src_data_dir: " + (dir / "wmt") +
                                          ", src_max_sequence_length: 4, tgt_max_sequence_length: 4, "
                                          "batch_size: 2, shuffle: false, dynamic_loss_weight: true}");
  const models::Features b = loader->next();  // the 4-token source of line 2 does not fit
  EXPECT_TRUE(torch::equal(b.at("input_ids"), torch::tensor({4, 5, 0, 0, 10, 0, 0, 0}, torch::kLong).view({2, 4})));
  EXPECT_TRUE(torch::equal(b.at("attention_mask"), torch::tensor({1, 1, 0, 0, 1, 0, 0, 0}, torch::kLong).view({2, 4})));
  EXPECT_TRUE(
      torch::equal(b.at("decoder_input_ids"), torch::tensor({2, 11, 10, 9, 2, 7, 6, 0}, torch::kLong).view({2, 4})));
  EXPECT_TRUE(torch::equal(b.at("labels"), torch::tensor({11, 10, 9, 3, 7, 6, 3, 0}, torch::kLong).view({2, 4})));
  EXPECT_TRUE(
      torch::equal(b.at("decoder_attention_mask"), torch::tensor({1, 1, 1, 1, 1, 1, 1, 0}, torch::kLong).view({2, 4})));
  EXPECT_FLOAT_EQ(b.at("loss_weight")[0][0].item<float>(), 2.0f / 7.0f);
}

// Legacy configs in modelzoo's shapes (no model.name: d_kv picks T5; the
// positions come from train_input's lengths) train on their processors: the
// loss falls, eval reports accuracy_lm, and a resumed T5 run repeats the
// uninterrupted one's losses.
TEST(T5, TrainsFromLegacyConfigs) {
  TempDir dir;
  write_vocab(dir);
  std::string text;
  for (int d = 0; d < 16; ++d) {
    for (int i = 0; i < 24; ++i) text += "w" + std::to_string(4 + (i + d) % 8) + " ";
    text += "\n";
  }
  zoo::testing::write_file(dir / "c4/part0.txt", text);
  zoo::testing::write_file(dir / "c4/meta.dat", "part0.txt 16\n");
  std::string src, tgt;
  for (int i = 0; i < 16; ++i) {
    src += "w" + std::to_string(4 + i % 8) + " w" + std::to_string(4 + (i + 1) % 8) + "\n";
    tgt += "w" + std::to_string(4 + (i + 1) % 8) + " w" + std::to_string(4 + i % 8) + "\n";
  }
  zoo::testing::write_file(dir / "wmt/a.en", src);
  zoo::testing::write_file(dir / "wmt/a.de", tgt);
  zoo::testing::write_file(dir / "wmt/meta.dat", "a.en a.de 16\n");
  auto run = [&](const std::string& name, const std::string& input, const std::string& model) {
    const std::string section =
        "  src_vocab_file: " + (dir / "vocab.txt") + "\n  batch_size: 8\n  shuffle: true\n" + input;
    const std::string params = zoo::testing::write_file(
        dir / (name + ".yaml"), "train_input:\n" + section + "eval_input:\n" + section + "model:\n" + model + R"(
  d_model: 32
  d_kv: 8
  num_heads: 4
  d_ff: 64
  encoder_num_hidden_layers: 2
  decoder_num_hidden_layers: 2
  dropout_rate: 0.0
  encoder_nonlinearity: relu
  decoder_nonlinearity: relu
optimizer:
  optimizer_type: Adam
  learning_rate: 0.003
runconfig:
  seed: 1
  max_steps: 60
  log_steps: 1
  eval_steps: 2
  eval_frequency: 60
  checkpoint_steps: 30
)");
    auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                       " --mode train_and_eval --model_dir " + (dir / name));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::vector<double> losses = zoo::testing::train_losses(r.output);
    EXPECT_EQ(losses.size(), 60u) << r.output;
    if (!losses.empty())
      EXPECT_LT(losses.back(), 0.5 * losses.front()) << name << ": " << losses.front() << " -> " << losses.back();
    EXPECT_NE(r.output.find("eval/accuracy_lm"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("so zoo builds t5"), std::string::npos) << r.output;
    return losses;
  };
  const std::vector<double> t5 =
      run("t5",
          "  data_processor: T5DynamicDataProcessor\n  src_data_dir: " + (dir / "c4") +
              "\n  extra_ids: 4\n  src_max_sequence_length: 16\n  tgt_max_sequence_length: 6\n",
          "  src_vocab_size: 12\n  extra_ids: 4\n  mlm_loss_scaling: precomputed_num_masked\n  norm_type: rmsnorm");
  run("transformer",
      "  data_processor: TransformerDynamicDataProcessor\n  src_data_dir: " + (dir / "wmt") +
          "\n  src_max_sequence_length: 4\n  tgt_max_sequence_length: 4\n",
      "  src_vocab_size: 12\n  tgt_vocab_size: 12\n  position_embedding_type: fixed\n  norm_type: layernorm\n"
      "  use_pre_encoder_decoder_layer_norm: false\n  use_pre_encoder_decoder_dropout: true\n  use_ffn_bias: true\n"
      "  use_transformer_initialization: true\n  mlm_loss_scaling: num_masked");
  // Resumed from step 30, T5 trains on the same corrupted pieces to the same losses.
  std::filesystem::create_directories(dir / "t5_resumed");
  std::filesystem::copy_file(dir / "t5/checkpoint_30.mdl", dir / "t5_resumed/checkpoint_30.mdl");
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + (dir / "t5.yaml") +
                                     " --mode train --model_dir " + (dir / "t5_resumed"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> resumed = zoo::testing::train_losses(r.output);
  ASSERT_EQ(t5.size(), 60u);
  EXPECT_EQ(resumed, std::vector<double>(t5.begin() + 30, t5.end())) << r.output;
}

// modelzoo's T5 shapes build the parameters their math implies; the
// Transformer's positions default to train_input's lengths; bad keys are named.
TEST(T5, SizesAndConfigErrors) {
  YAML::Node y = YAML::Load(zoo::testing::tiny_params_yaml("/d", "/m"));
  y.remove("eval_input");
  y["train_input"] = YAML::Load(
      "{data_processor: T5DynamicDataProcessor, src_vocab_file: v.txt, src_data_dir: d, "
      "src_max_sequence_length: 512, tgt_max_sequence_length: 114, batch_size: 8}");
  // T5-base as modelzoo 2.1's t5_base.yaml: 12 + 12 layers, d_ff 3072, shared and tied embeddings.
  y["model"] = YAML::Load(
      "{src_vocab_size: 32001, extra_ids: 100, d_model: 768, d_kv: 64, num_heads: 12, d_ff: 3072, "
      "encoder_num_hidden_layers: 12, decoder_num_hidden_layers: 12, norm_type: rmsnorm, "
      "dropout_rate: 0.1, encoder_nonlinearity: relu, decoder_nonlinearity: relu}");
  Params p = params_from_node(y, "p.yaml", YAML::Node());
  const int64_t C = 768, F = 3072, L = 12, V = 32101;
  const int64_t encoder_layer = 4 * C * C + 2 * C * F + 2 * C, decoder_layer = 8 * C * C + 2 * C * F + 3 * C;
  EXPECT_EQ(summarize_model(p).parameters, V * C + 2 * 32 * 12 + L * (encoder_layer + decoder_layer) + 2 * C);
  EXPECT_EQ(p.model->to_yaml()["src_max_position_embeddings"].as<int64_t>(), 512);
  EXPECT_EQ(p.model->to_yaml()["tgt_max_position_embeddings"].as<int64_t>(), 114);

  auto error_of = [&](const std::string& model_yaml) {
    YAML::Node bad = YAML::Clone(y);
    for (const auto& kv : YAML::Load(model_yaml)) bad["model"][kv.first.as<std::string>()] = kv.second;
    try {
      params_from_node(bad, "p.yaml", YAML::Node());
    } catch (const config::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("{tgt_vocab_size: 100}").find("model.share_encoder_decoder_embedding: needs tgt_vocab_size"),
            std::string::npos);
  EXPECT_NE(error_of("{norm_type: batchnorm}").find("model.norm_type"), std::string::npos);
  EXPECT_NE(error_of("{mup_base_d_model: 256}").find("muP needs both"), std::string::npos);
  EXPECT_NE(error_of("{encoder_nonlinearity: tanh}").find("model.encoder_nonlinearity"), std::string::npos);

  // modelzoo's own files, in tests/modelzoo_configs: T5-small (8 + 8 layers, LayerNorm) and Transformer-base.
  Params t5 = load_params(zoo::testing::modelzoo_configs_dir() + "/transformers_pytorch_t5_t5_small.yaml", {});
  const int64_t c = 512, f = 1024, small_layer = 4 * c * c + 2 * c * f + 2 * 2 * c;
  EXPECT_EQ(summarize_model(t5).parameters,
            32101 * c + 2 * 32 * 8 + 8 * small_layer + 8 * (small_layer + 4 * c * c + 2 * c) + 2 * 2 * c);
  Params transformer =
      load_params(zoo::testing::modelzoo_configs_dir() + "/transformers_pytorch_transformer_transformer_base.yaml", {});
  const int64_t tf = 2048, layer = 4 * c * c + 2 * c * tf + tf + c + 2 * 2 * c;  // FFN biases
  EXPECT_EQ(summarize_model(transformer).parameters,
            36550 * c + 6 * layer + 6 * (layer + 4 * c * c + 2 * c) + 2 * 2 * c);
  EXPECT_EQ(transformer.model->to_yaml()["src_max_position_embeddings"].as<int64_t>(), 256);
}
