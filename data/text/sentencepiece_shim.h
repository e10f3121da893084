// A C interface to the SentencePiece library, built as its own shared
// library (libzoo_sentencepiece.so) and opened with RTLD_DEEPBIND.
// Why: Debian's libsentencepiece carries a private protobuf 3.14 whose
// symbols it exports, while LibTorch and zoo's TensorBoard writer load the
// system's libprotobuf 3.21. In one symbol namespace one of them gets the
// other's runtime and protobuf aborts at its version check. Opened with
// RTLD_DEEPBIND the library resolves its own symbols first.
// Defines: the zoo_spm_* functions (ids are ints, strings are byte ranges;
// what they allocate is released with zoo_spm_release).
#pragma once

#include <cstddef>

extern "C" {
// A loaded model, or nullptr with *error set.
void* zoo_spm_load(const char* path, char** error);
void zoo_spm_unload(void* model);
int zoo_spm_piece_size(const void* model);
int zoo_spm_is_control(const void* model, int id);
int zoo_spm_unk_id(const void* model);
int zoo_spm_piece_to_id(const void* model, const char* piece, size_t length);
// The piece's bytes, valid while the model is loaded.
const char* zoo_spm_id_to_piece(const void* model, int id, size_t* length);
// 0 on success; *ids (n of them) or *error is allocated.
int zoo_spm_encode(const void* model, const char* text, size_t length, int** ids, size_t* n, char** error);
int zoo_spm_decode(const void* model, const int* ids, size_t n, char** text, size_t* length, char** error);
void zoo_spm_release(void* allocated);
}
