// Implementation of data/text/sentencepiece_model.h: the shim library is
// opened once, next to the binary that holds this code.
#include "data/text/sentencepiece_model.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "data/text/sentencepiece_shim.h"

namespace zoo::text {
namespace {

struct Shim {
  decltype(&zoo_spm_load) load;
  decltype(&zoo_spm_unload) unload;
  decltype(&zoo_spm_piece_size) piece_size;
  decltype(&zoo_spm_is_control) is_control;
  decltype(&zoo_spm_unk_id) unk_id;
  decltype(&zoo_spm_piece_to_id) piece_to_id;
  decltype(&zoo_spm_id_to_piece) id_to_piece;
  decltype(&zoo_spm_encode) encode;
  decltype(&zoo_spm_decode) decode;
  decltype(&zoo_spm_release) release;
};

const Shim& shim() {
  static const Shim s = [] {
    // Beside the executable; else beside the shared object holding this code.
    const char* const name = "libzoo_sentencepiece.so";
    std::error_code no_link;
    auto path = std::filesystem::read_symlink("/proc/self/exe", no_link).parent_path() / name;
    Dl_info self{};
    if (!std::filesystem::exists(path) && dladdr(reinterpret_cast<void*>(&shim), &self) && self.dli_fname)
      path = std::filesystem::path(self.dli_fname).parent_path() / name;
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!lib)
      throw std::runtime_error("cannot open " + path.string() +
                               " (zoo's SentencePiece library, built beside the zoo "
                               "binary): " +
                               dlerror());
    auto get = [&](const char* name) {
      void* f = dlsym(lib, name);
      if (!f) throw std::runtime_error(path.string() + " lacks " + name + ": rebuild zoo");
      return f;
    };
    Shim t;
    t.load = reinterpret_cast<decltype(t.load)>(get("zoo_spm_load"));
    t.unload = reinterpret_cast<decltype(t.unload)>(get("zoo_spm_unload"));
    t.piece_size = reinterpret_cast<decltype(t.piece_size)>(get("zoo_spm_piece_size"));
    t.is_control = reinterpret_cast<decltype(t.is_control)>(get("zoo_spm_is_control"));
    t.unk_id = reinterpret_cast<decltype(t.unk_id)>(get("zoo_spm_unk_id"));
    t.piece_to_id = reinterpret_cast<decltype(t.piece_to_id)>(get("zoo_spm_piece_to_id"));
    t.id_to_piece = reinterpret_cast<decltype(t.id_to_piece)>(get("zoo_spm_id_to_piece"));
    t.encode = reinterpret_cast<decltype(t.encode)>(get("zoo_spm_encode"));
    t.decode = reinterpret_cast<decltype(t.decode)>(get("zoo_spm_decode"));
    t.release = reinterpret_cast<decltype(t.release)>(get("zoo_spm_release"));
    return t;
  }();
  return s;
}

// Takes ownership of an error string the shim allocated.
std::string take_error(char* error) {
  std::string s = error ? error : "unknown error";
  shim().release(error);
  return s;
}

std::string piece_of(const void* model, int id) {
  size_t length = 0;
  const char* p = shim().id_to_piece(model, id, &length);
  return std::string(p, length);
}

}  // namespace

SentencePieceModel::SentencePieceModel(const std::string& path, std::vector<AddedToken> added_tokens) {
  char* error = nullptr;
  model_ = shim().load(path.c_str(), &error);
  if (!model_)
    throw std::invalid_argument(path + ": not a SentencePiece model the SentencePiece library can load (" +
                                take_error(error) + ")");
  piece_size_ = shim().piece_size(model_);
  vocab_size_ = piece_size_;
  // The model's control pieces (<s>, </s>, ...) are never produced from text
  // by the library; as added tokens they are matched literally.
  for (int id = 0; id < piece_size_; ++id)
    if (shim().is_control(model_, id)) added_tokens.push_back({piece_of(model_, id), id, true});
  for (const auto& a : added_tokens) vocab_size_ = std::max<int64_t>(vocab_size_, a.id + 1);
  std::stable_sort(added_tokens.begin(), added_tokens.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  added_tokens_ = std::move(added_tokens);
}

SentencePieceModel::~SentencePieceModel() { shim().unload(model_); }

std::optional<int32_t> SentencePieceModel::token_to_id(const std::string& token) const {
  for (const auto& a : added_tokens_)
    if (a.content == token) return a.id;
  const int id = shim().piece_to_id(model_, token.data(), token.size());
  if (id == shim().unk_id(model_) && token != piece_of(model_, id)) return std::nullopt;
  return id;
}

std::vector<int32_t> SentencePieceModel::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  auto stretch = [&](std::string_view s) {
    if (s.empty()) return;
    int* out = nullptr;
    size_t n = 0;
    char* error = nullptr;
    if (shim().encode(model_, s.data(), s.size(), &out, &n, &error) != 0)
      throw std::runtime_error("SentencePiece could not encode the text: " + take_error(error));
    ids.insert(ids.end(), out, out + n);
    shim().release(out);
  };
  size_t start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* hit = nullptr;
    for (const auto& a : added_tokens_)
      if (text.compare(pos, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    if (!hit) {
      ++pos;
      continue;
    }
    stretch(text.substr(start, pos - start));
    ids.push_back(hit->id);
    pos += hit->content.size();
    start = pos;
  }
  stretch(text.substr(start));
  return ids;
}

std::string SentencePieceModel::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  std::vector<int> run;
  auto flush = [&] {
    if (run.empty()) return;
    char* text = nullptr;
    size_t length = 0;
    char* error = nullptr;
    if (shim().decode(model_, run.data(), run.size(), &text, &length, &error) != 0)
      throw std::runtime_error("SentencePiece could not decode: " + take_error(error));
    out.append(text, length);
    shim().release(text);
    run.clear();
  };
  for (int32_t id : ids) {
    const auto added =
        std::find_if(added_tokens_.begin(), added_tokens_.end(), [&](const AddedToken& a) { return a.id == id; });
    if (added != added_tokens_.end()) {
      flush();
      out += added->content;
    } else if (id >= 0 && id < piece_size_) {
      run.push_back(id);
    } else {
      throw std::out_of_range("token id " + std::to_string(id) + " is not in the vocabulary");
    }
  }
  flush();
  return out;
}

}  // namespace zoo::text
