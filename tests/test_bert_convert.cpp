// zoo convert for BERT: Python writes a tiny random checkpoint in Hugging
// Face's BertForPreTraining (or BertForMaskedLM, RoBERTa, or a fine-tuned
// sequence or token classifier) layout with the masked-LM
// and next-sentence logits of BERT's forward pass written here from the
// paper (transformers cannot be installed here). zoo must convert it, give
// those logits to 1e-5 on a padded batch, and convert back to the same
// tensors bit for bit; what HF's BERT cannot hold must be refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "convert_fixtures.h"
#include "models/bert/bert.h"
#include "models/bert/classifier.h"
#include "models/bert/token_classifier.h"
#include "models/dpr/dpr.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

// argv: dir, then "nsp" (BertForPreTraining), "mlm" (BertForMaskedLM: no
// pooler, no NSP head), "roberta" (RobertaForMaskedLM: roberta. and
// lm_head names, one token type, positions counted from pad_token_id + 1),
// "seq" (BertForSequenceClassification: pooler and a 3-class classifier),
// "tok" (BertForTokenClassification: a 5-class classifier on every token),
// or "dprq" / "dprc" (DPRQuestionEncoder / DPRContextEncoder: other weights
// each, the [CLS] state, in hf/q_encoder or hf/ctx_encoder; "dprq" also
// keeps a BERT pooler, unused, as facebook's DPR checkpoints do).
const std::string kPyBert = zoo::testing::oracle("bert_convert_make_bert.py");

// The fixture's inputs: 2 rows of 12 token ids, token types and the padding mask.
struct BertInputs {
  torch::Tensor ids, types, mask;
};

// Writes the fixture for `kind` into `dir` and converts dir/hf to dir/zoo
// (no --model: config.json's model_type and architectures pick the converter).
BertInputs convert_bert_fixture(const TempDir& dir, const std::string& kind) {
  zoo::testing::run_fixture(dir, "bert.py", kPyBert, kind);
  if (::testing::Test::HasFatalFailure()) return {};
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});
  using zoo::testing::read_raw;
  return {read_raw(dir / "ids.bin", torch::kLong, {2, 12}), read_raw(dir / "types.bin", torch::kLong, {2, 12}),
          read_raw(dir / "mask.bin", torch::kLong, {2, 12})};
}

void expect_bert_converts(const std::string& kind) {
  TempDir dir;
  const auto [ids, types, mask] = convert_bert_fixture(dir, kind);
  if (::testing::Test::HasFatalFailure()) return;
  auto model = std::dynamic_pointer_cast<models::BertModel>(zoo::testing::load_converted(dir));
  ASSERT_TRUE(model);
  using zoo::testing::read_raw;
  torch::NoGradGuard no_grad;
  // RoBERTa takes no token types (HF adds type 0's row, as zoo does without them).
  auto out = model->run(ids, mask, kind == "roberta" ? torch::Tensor() : types, {});
  const torch::Tensor mlm = read_raw(dir / "mlm.bin", torch::kFloat, {2, 12, 50});
  // Padding positions' outputs are not compared: HF adds -1e9 where zoo hides the key outright.
  const torch::Tensor real = mask.to(torch::kBool).unsqueeze(-1);
  EXPECT_LT(((out.mlm_logits.narrow(-1, 0, 50) - mlm) * real).abs().max().item<double>(), 1e-5) << kind;
  if (kind == "nsp") {
    EXPECT_LT((out.nsp_logits - read_raw(dir / "nsp.bin", torch::kFloat, {2, 2})).abs().max().item<double>(), 1e-5);
  } else {
    EXPECT_FALSE(out.nsp_logits.defined());
  }
  // Fine-tuning params: BERT reads modelzoo's CSV data with the checkpoint's vocabulary, lower-cased as its
  // tokenizer; RoBERTa (BPE, no WordPiece vocabulary) token-id HDF5 windows.
  const YAML::Node params = YAML::LoadFile(dir / "zoo/params.yaml");
  if (kind == "roberta") {
    EXPECT_EQ(params["train_input"]["data_processor"].as<std::string>(), "BertMlmDataProcessor");
    EXPECT_TRUE(params["model"]["mask_padding_in_positional_embed"].as<bool>());
  } else {
    EXPECT_EQ(params["train_input"]["data_processor"].as<std::string>(), "BertCSVDynamicMaskDataProcessor");
    EXPECT_EQ(params["train_input"]["vocab_file"].as<std::string>(), dir / "hf/vocab.txt");
    EXPECT_TRUE(params["train_input"]["do_lower"].as<bool>());
  }
  EXPECT_EQ(params["model"]["disable_nsp"].as<bool>(), kind != "nsp");

  convert::run_convert(
      {dir / "zoo/checkpoint_0.mdl", kind == "roberta" ? "roberta" : "bert", "zoo", "hf", std::nullopt, dir / "back"});
  auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  auto back = convert::read_safetensors(dir / "back/model.safetensors");
  size_t compared = 0;
  for (const auto& [k, t] : original) {
    if (k.find("embeddings.position_ids") != std::string::npos || k.find("decoder.weight") != std::string::npos)
      continue;  // a buffer, a tied copy
    ASSERT_TRUE(back.count(k)) << kind << ": " << k << " did not come back";
    EXPECT_TRUE(torch::equal(t, back[k])) << kind << ": " << k;
    ++compared;
  }
  EXPECT_EQ(compared, back.size()) << kind << ": the export wrote tensors the original did not have";
  const nlohmann::json config = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(config.at("architectures")[0], kind == "roberta" ? "RobertaForMaskedLM"
                                           : kind == "nsp"   ? "BertForPreTraining"
                                                             : "BertForMaskedLM");
  EXPECT_EQ(config.at("max_position_embeddings"), kind == "roberta" ? 18 : 16);
}

// BertForSequenceClassification ("seq") and BertForTokenClassification
// ("tok"): zoo's fine-tuning families give HF's logits (real tokens' for
// "tok"), their params read modelzoo's fine-tuning data, and the export is the
// original bit for bit with the labels' names.
void expect_bert_finetune_converts(const std::string& kind) {
  TempDir dir;
  const auto [ids, types, mask] = convert_bert_fixture(dir, kind);
  if (::testing::Test::HasFatalFailure()) return;
  using zoo::testing::read_raw;
  auto model = zoo::testing::load_converted(dir);
  torch::NoGradGuard no_grad;
  const YAML::Node params = YAML::LoadFile(dir / "zoo/params.yaml");
  EXPECT_EQ(params["train_input"]["vocab_file"].as<std::string>(), dir / "hf/vocab.txt");
  if (kind == "seq") {
    auto classifier = std::dynamic_pointer_cast<models::BertClassifierModel>(model);
    ASSERT_TRUE(classifier);
    const torch::Tensor expected = read_raw(dir / "mlm.bin", torch::kFloat, {2, 3});
    EXPECT_LT((classifier->logits(ids, mask, types) - expected).abs().max().item<double>(), 1e-5);
    EXPECT_EQ(params["model"]["num_labels"].as<int64_t>(), 3);
    EXPECT_EQ(params["model"]["problem_type"].as<std::string>(), "single_label_classification");
    EXPECT_EQ(params["model"]["task_dropout"].as<double>(), 0.1);  // classifier_dropout null: hidden_dropout_prob
    EXPECT_EQ(params["train_input"]["data_processor"].as<std::string>(), "SST2DataProcessor");
  } else {
    auto tagger = std::dynamic_pointer_cast<models::BertTokenClassifierModel>(model);
    ASSERT_TRUE(tagger);
    const torch::Tensor expected = read_raw(dir / "mlm.bin", torch::kFloat, {2, 12, 5});
    const torch::Tensor real = mask.to(torch::kBool).unsqueeze(-1);
    EXPECT_LT(((tagger->logits(ids, mask, types) - expected) * real).abs().max().item<double>(), 1e-5);
    EXPECT_EQ(params["model"]["num_classes"].as<int64_t>(), 5);
    EXPECT_EQ(params["train_input"]["data_processor"].as<std::string>(), "BertTokenClassifierDataProcessor");
    // HF's id2label becomes the label_vocab_file the data and the F1 read.
    const auto labels =
        nlohmann::json::parse(zoo::testing::read_file(params["train_input"]["label_vocab_file"].as<std::string>()));
    EXPECT_EQ(labels.at("B-PER"), 1);
    EXPECT_EQ(labels.at("I-LOC"), 4);
    EXPECT_EQ(params["model"]["label_vocab_file"].as<std::string>(),
              params["train_input"]["label_vocab_file"].as<std::string>());
  }
  const std::string converter = kind == "seq" ? "bert-sequence-classifier" : "bert-token-classifier";
  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "", "zoo", "hf", std::nullopt, dir / "back"});
  zoo::testing::expect_exported_bit_for_bit(dir / "hf/model.safetensors", dir / "back/model.safetensors",
                                            {"bert.embeddings.position_ids"});
  const nlohmann::json config = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(config.at("architectures")[0],
            kind == "seq" ? "BertForSequenceClassification" : "BertForTokenClassification");
  EXPECT_EQ(config.at("id2label").at("1"), kind == "seq" ? "LABEL_1" : "B-PER");
  EXPECT_EQ(models::hf_converter_for(config), converter);
}

}  // namespace

// BertForPreTraining: both heads; the next-sentence head's pooler is tanh.
TEST(ConvertBert, PreTrainingMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  expect_bert_converts("nsp");
}

// BertForMaskedLM weights (no pooler, no cls.seq_relationship) become a
// masked-LM-only model (disable_nsp), exported back as BertForMaskedLM.
TEST(ConvertBert, MaskedLmOnlyCheckpointConvertsWithoutTheNspHead) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  expect_bert_converts("mlm");
}

// RobertaForMaskedLM: positions counted past the padding id, one token type,
// gelu in the head: zoo's bert with disable_nsp and mask_padding_in_positional_embed.
TEST(ConvertBert, RobertaMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  expect_bert_converts("roberta");
}

// modelzoo's bert-sequence-classifier: the pooled [CLS] state and a classifier.
TEST(ConvertBert, SequenceClassifierMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  expect_bert_finetune_converts("seq");
}

// modelzoo's bert-token-classifier: every token's state and a classifier; id2label is the label vocabulary.
TEST(ConvertBert, TokenClassifierMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  expect_bert_finetune_converts("tok");
}

// Hugging Face's DPR encoders, as modelzoo's converter lays them out (the
// sub-directories q_encoder/ and ctx_encoder/ of one directory), become
// zoo's dpr: each encoder's [CLS] state is HF's pooled output, and the
// export writes both checkpoints back bit for bit.
TEST(ConvertBert, DprEncodersMatchTheReferenceAndRoundTrip) {
  TempDir dir;
  for (const char* side : {"dprq", "dprc"}) zoo::testing::run_fixture(dir, "bert.py", kPyBert, side);
  if (HasFatalFailure()) return;
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});  // model_type dpr picks it
  auto model = std::dynamic_pointer_cast<models::DprModel>(zoo::testing::load_converted(dir));
  ASSERT_TRUE(model);
  using zoo::testing::read_raw;
  torch::NoGradGuard no_grad;
  for (const std::string side : {"dprq", "dprc"}) {
    const torch::Tensor ids = read_raw(dir / ("ids_" + side + ".bin"), torch::kLong, {2, 12});
    const torch::Tensor types = read_raw(dir / ("types_" + side + ".bin"), torch::kLong, {2, 12});
    const torch::Tensor mask = read_raw(dir / ("mask_" + side + ".bin"), torch::kLong, {2, 12});
    const torch::Tensor pooled = read_raw(dir / ("mlm_" + side + ".bin"), torch::kFloat, {2, 32});
    const auto encoder = side == "dprq" ? model->question_encoder : model->ctx_encoder;
    EXPECT_LT((model->embed(encoder, ids, mask, types) - pooled).abs().max().item<double>(), 1e-5) << side;
  }
  const YAML::Node params = YAML::LoadFile(dir / "zoo/params.yaml");
  EXPECT_EQ(params["model"]["pooler_type"].as<std::string>(), "cls");
  EXPECT_EQ(params["train_input"]["data_processor"].as<std::string>(), "DPRHDF5DataProcessor");

  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "", "zoo", "hf", std::nullopt, dir / "back"});
  for (const std::string sub : {"q_encoder", "ctx_encoder"}) {
    auto original = convert::read_safetensors(dir / ("hf/" + sub + "/model.safetensors"));
    auto back = convert::read_safetensors(dir / ("back/" + sub + "/model.safetensors"));
    const std::string base = (sub == "q_encoder" ? "question_encoder" : "ctx_encoder") + std::string(".bert_model.");
    for (const char* unused : {"embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"})
      original.erase(base + unused);  // a buffer; the unused pooler the question encoder's fixture carries
    EXPECT_EQ(back.size(), original.size()) << sub;
    for (const auto& [k, t] : original) EXPECT_TRUE(back.count(k) && torch::equal(t, back[k])) << sub << ": " << k;
    const nlohmann::json config =
        nlohmann::json::parse(zoo::testing::read_file(dir / ("back/" + sub + "/config.json")));
    EXPECT_EQ(config.at("architectures")[0], sub == "q_encoder" ? "DPRQuestionEncoder" : "DPRContextEncoder");
    EXPECT_EQ(config.at("model_type"), "dpr");
    EXPECT_EQ(config.at("projection_dim"), 0);
  }
  // With transformers (ZOO_TRANSFORMERS_PYTHON): HF's own DPR classes load zoo's export of
  // each encoder without missing or unused keys and pool the fixture's [CLS] states.
  if (zoo::testing::transformers_python()) {
    const std::string check =
        zoo::testing::write_file(dir / "check_dpr.py", zoo::testing::oracle("bert_convert_check_dpr.py"));
    const auto r =
        zoo::testing::run_command(std::string(zoo::testing::transformers_python()) + " " + check + " " + dir.path());
    std::cout << "[ transformers ] " << r.output;
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  // A projection of the pooled state has no place in zoo's dpr; a missing part is named.
  nlohmann::json projected = nlohmann::json::parse(zoo::testing::read_file(dir / "hf/ctx_encoder/config.json"));
  projected["projection_dim"] = 16;
  std::ofstream(dir / "hf/ctx_encoder/config.json") << projected.dump();
  zoo::testing::expect_refused(
      [&] {
        convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo2"});
      },
      {"projection_dim", "ctx_encoder"});
  std::filesystem::remove_all(dir / "hf/ctx_encoder");
  zoo::testing::expect_refused(
      [&] {
        convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo3"});
      },
      {"sub-directory ctx_encoder/"});
}

// Options HF's BERT has no field for are refused by name, never dropped;
// so is a config.json zoo's bert cannot build.
TEST(ConvertBert, UnrepresentableOptionsAreRefused) {
  const auto export_error = [](const std::string& extra) {
    YAML::Node y = YAML::Load(
        "{vocab_size: 50, hidden_size: 32, num_hidden_layers: 1, num_heads: 4, filter_size: 48, "
        "max_position_embeddings: 16, pooler_nonlinearity: tanh" +
        extra + "}");
    auto spec = models::find_model("bert").parse(y, config::Context{"m.yaml", "model"});
    try {
      models::find_hf_converter("bert").config_to_hf(*spec);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(export_error(""), "");
  EXPECT_NE(export_error(", norm_first: true")
                .find("model.norm_first = true: Hugging Face's bert normalizes after each "
                      "residual add"),
            std::string::npos);
  EXPECT_NE(export_error(", mup_base_hidden_size: 8, mup_base_filter_size: 12").find("has no muP"), std::string::npos);
  EXPECT_NE(export_error(", position_embedding_type: rotary").find("model.position_embedding_type = rotary"),
            std::string::npos);
  nlohmann::json c = {{"model_type", "bert"},
                      {"vocab_size", 50},
                      {"hidden_size", 32},
                      {"num_hidden_layers", 1},
                      {"num_attention_heads", 4},
                      {"intermediate_size", 48},
                      {"max_position_embeddings", 16},
                      {"position_embedding_type", "relative_key"}};
  zoo::testing::expect_refused([&] { models::find_hf_converter("bert").config_from_hf(c); },
                               {"position_embedding_type", "relative_key"});
}
