// What the BERT tests share. Defines: tiny_bert.
#pragma once

#include "models/bert/bert.h"

namespace zoo::testing {

// A two-layer BERT small enough for float64 references and emulated kernels:
// vocab 50, width 32, 4 heads, FFN 48, 16 positions, no dropout, masked-LM
// loss weight 0.25.
inline models::BertOptions tiny_bert() {
  models::BertOptions o;
  o.vocab_size = 50;
  o.hidden_size = 32;
  o.num_hidden_layers = 2;
  o.num_heads = 4;
  o.filter_size = 48;
  o.max_position_embeddings = 16;
  o.dropout_rate = 0.0;
  o.pooler_nonlinearity = "tanh";
  o.mlm_loss_weight = 0.25;
  return o;
}

}  // namespace zoo::testing
