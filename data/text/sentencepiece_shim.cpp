// Implementation of data/text/sentencepiece_shim.h over the SentencePiece library.
#include "data/text/sentencepiece_shim.h"

#include <sentencepiece_processor.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const sentencepiece::SentencePieceProcessor& sp(const void* model) {
  return *static_cast<const sentencepiece::SentencePieceProcessor*>(model);
}

char* copy(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

}  // namespace

extern "C" {

void* zoo_spm_load(const char* path, char** error) {
  auto* model = new sentencepiece::SentencePieceProcessor();
  const auto status = model->Load(path);
  if (status.ok()) return model;
  *error = copy(status.ToString());
  delete model;
  return nullptr;
}

void zoo_spm_unload(void* model) { delete static_cast<sentencepiece::SentencePieceProcessor*>(model); }
int zoo_spm_piece_size(const void* model) { return sp(model).GetPieceSize(); }
int zoo_spm_is_control(const void* model, int id) { return sp(model).IsControl(id) ? 1 : 0; }
int zoo_spm_unk_id(const void* model) { return sp(model).unk_id(); }

int zoo_spm_piece_to_id(const void* model, const char* piece, size_t length) {
  return sp(model).PieceToId(std::string(piece, length));
}

const char* zoo_spm_id_to_piece(const void* model, int id, size_t* length) {
  const std::string& piece = sp(model).IdToPiece(id);
  *length = piece.size();
  return piece.data();
}

int zoo_spm_encode(const void* model, const char* text, size_t length, int** ids, size_t* n, char** error) {
  std::vector<int> out;
  const auto status = sp(model).Encode(std::string(text, length), &out);
  if (!status.ok()) {
    *error = copy(status.ToString());
    return 1;
  }
  *n = out.size();
  *ids = static_cast<int*>(std::malloc(sizeof(int) * (out.empty() ? 1 : out.size())));
  std::memcpy(*ids, out.data(), sizeof(int) * out.size());
  return 0;
}

int zoo_spm_decode(const void* model, const int* ids, size_t n, char** text, size_t* length, char** error) {
  std::string out;
  const auto status = sp(model).Decode(std::vector<int>(ids, ids + n), &out);
  if (!status.ok()) {
    *error = copy(status.ToString());
    return 1;
  }
  *length = out.size();
  *text = copy(out);
  return 0;
}

void zoo_spm_release(void* allocated) { std::free(allocated); }
}
