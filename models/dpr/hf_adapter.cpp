// Hugging Face's DPR <-> zoo's dpr. HF keeps the two encoders as two models,
// DPRQuestionEncoder (question_encoder.bert_model.*) and DPRContextEncoder
// (ctx_encoder.bert_model.*), each a BERT without its pooler that pools the
// [CLS] state; as modelzoo's dpr converter, zoo reads and writes them as the
// sub-directories q_encoder/ and ctx_encoder/ of one directory. A projection
// of the pooled state (projection_dim > 0) has no place in zoo's DPR.
#include "models/bert/hf_adapter.h"

#include "models/dpr/dpr.h"

namespace zoo::models {
namespace {

struct DprSide {
  const char* dir;     // the sub-directory, and zoo's section name
  const char* module;  // HF's and zoo's module: question_encoder. / ctx_encoder.
  const char* architecture;
  const DprEncoderOptions& (DprOptions::*options)() const;
};
const DprSide kSides[] = {{"q_encoder", "question_encoder.", "DPRQuestionEncoder", &DprOptions::question},
                          {"ctx_encoder", "ctx_encoder.", "DPRContextEncoder", &DprOptions::context}};

const DprOptions& dpr_options(const ModelSpec& m) {
  return spec_options<DprSpec>(m, "the dpr Hugging Face converter takes a dpr model section");
}

HfKeyMap dpr_keys(const DprOptions& o) {
  HfKeyMap m;
  for (const DprSide& side : kSides) {
    const std::string hf = std::string(side.module) + "bert_model.";
    m.hf_buffers.push_back(hf + "embeddings.position_ids");
    m.hf_buffers.push_back(hf + "embeddings.token_type_ids");
    // facebook's DPR checkpoints carry a BERT pooler that HF's DPR never builds (nor does zoo's: [CLS] pooling).
    m.hf_buffers.push_back(hf + "pooler.dense.");
    const DprEncoderOptions& e = (o.*side.options)();
    map_bert_encoder(m, e, hf, side.module, e.segments(), /*pooler=*/false);
  }
  return m;
}

}  // namespace

HfAdapter dpr_hf_adapter() {
  HfAdapter a;
  for (const DprSide& side : kSides) a.components.push_back({side.dir, side.module});
  a.model_types = {"dpr"};
  a.config_from_hf = [](const nlohmann::json& both) {
    YAML::Node m(YAML::NodeType::Map);
    m["name"] = "dpr";
    for (const DprSide& side : kSides) {
      const nlohmann::json& c = both.at(side.dir);
      if (c.value("projection_dim", 0) > 0)
        refuse_config(c, "projection_dim", "projects the pooled [CLS] state; zoo's dpr pools it as is", side.dir);
      YAML::Node e = bert_encoder_shape(c);
      e.remove("name");
      e["add_pooling_layer"] = false;  // HF's DPR encoders have no pooler
      m[side.dir] = e;
    }
    m["pooler_type"] = "cls";
    return m;
  };
  a.config_to_hf = [](const ModelSpec& model) {
    const DprOptions& o = dpr_options(model);
    const ExportCheck check("dpr");
    check.expect(o.use_biencoder, "use_biencoder", "false", "has a question and a context encoder")
        .expect(o.pooler_type == "cls", "pooler_type", o.pooler_type, "pools the [CLS] state");
    nlohmann::json both = nlohmann::json::object();
    for (const DprSide& side : kSides) {
      const DprEncoderOptions& e = (o.*side.options)();
      check_bert_layout_export(check, e, /*roberta=*/false, /*pooler=*/false);
      nlohmann::json c = bert_encoder_config(e, /*roberta=*/false, e.segments());
      c["model_type"] = "dpr";
      c["architectures"] = {side.architecture};
      c["projection_dim"] = 0;
      both[side.dir] = c;
    }
    return both;
  };
  a.from_hf = [](const StateDict& hf, const ModelSpec& m) { return map_to_zoo(dpr_keys(dpr_options(m)), hf); };
  a.to_hf = [](const StateDict& zoo, const ModelSpec& m) {
    const DprOptions& o = dpr_options(m);
    StateDict hf = map_to_hf(dpr_keys(o), zoo);
    for (const DprSide& side : kSides) {
      const DprEncoderOptions& e = (o.*side.options)();
      add_missing_token_types(hf, std::string(side.module) + "bert_model.", e.segments(), e.hidden_size);
    }
    return hf;
  };
  a.input_from_hf = [](const nlohmann::json&, const YAML::Node&, const std::string&) {
    YAML::Node in(YAML::NodeType::Map);
    in["data_processor"] = "DPRHDF5DataProcessor";  // modelzoo's pre-tokenized question/context HDF5
    return in;
  };
  return a;
}

}  // namespace zoo::models
