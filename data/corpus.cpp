// Implementation of data/corpus.h. Uses splitmix64 so the text is identical
// on every platform and LibTorch version.
#include "data/corpus.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "data/splitmix.h"

namespace zoo::data {
namespace {

struct Rng : SplitMix64 {
  int64_t below(int64_t n) { return static_cast<int64_t>(SplitMix64::below(static_cast<uint64_t>(n))); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(static_cast<int64_t>(v.size()))];
  }
};

const std::vector<std::string> kNames = {"ada", "bram", "cleo", "dax",  "elin", "finn", "gus",  "hana",
                                         "ivo", "juno", "kai",  "lena", "milo", "nora", "otto", "pia"};
const std::vector<std::string> kPlaces = {"the harbor",    "the old mill",   "the market", "the library",
                                          "the hill farm", "the river bank", "the bakery", "the tower"};
const std::vector<std::string> kThings = {"apple", "lamp", "book", "stone", "shell", "coin", "kite", "cup"};
const std::vector<std::string> kAdjectives = {"red", "small", "heavy", "shiny", "old", "green", "warm", "quiet"};
const std::vector<std::string> kVerbs = {"finds", "carries", "paints", "hides", "counts", "sells", "keeps"};
const std::vector<std::string> kNumbers = {"zero", "one",   "two",   "three", "four", "five",
                                           "six",  "seven", "eight", "nine",  "ten"};

std::string plural(const std::string& thing, int64_t n) { return n == 1 ? thing : thing + "s"; }

// One short story: a few sentences that reuse the same characters and numbers,
// so later sentences are predictable from earlier ones.
std::string story(Rng& r) {
  const std::string& a = r.pick(kNames);
  std::string b = r.pick(kNames);
  while (b == a) b = r.pick(kNames);
  const std::string& place = r.pick(kPlaces);
  const std::string& thing = r.pick(kThings);
  const std::string& adj = r.pick(kAdjectives);
  int64_t have = 2 + r.below(8), give = 1 + r.below(have - 1);
  std::string s;
  s += a + " walks to " + place + " and " + r.pick(kVerbs) + " a " + adj + " " + thing + ". ";
  s += a + " has " + kNumbers[have] + " " + plural(thing, have) + ". ";
  s += a + " gives " + kNumbers[give] + " to " + b + ", so " + a + " has " + kNumbers[have - give] + " " +
       plural(thing, have - give) + " and " + b + " has " + kNumbers[give] + ". ";
  int64_t x = r.below(50), y = r.below(50);
  s += "at " + place + " " + b + " writes " + std::to_string(x) + " + " + std::to_string(y) + " = " +
       std::to_string(x + y) + ". ";
  int64_t start = r.below(5);
  s += b + " counts:";
  for (int64_t i = start; i < start + 5; ++i) s += " " + kNumbers[i];
  s += ".\n";
  return s;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error(tmp.string() + ": write failed");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace

std::string generate_corpus(uint64_t seed, int64_t num_bytes) {
  Rng r{seed};
  std::string text;
  while (static_cast<int64_t>(text.size()) < num_bytes) text += story(r);
  return text;
}

bool write_corpus(const std::string& dir, int64_t train_bytes, int64_t eval_bytes) {
  const std::filesystem::path train = std::filesystem::path(dir) / "train" / "corpus.txt";
  const std::filesystem::path eval = std::filesystem::path(dir) / "eval" / "corpus.txt";
  if (std::filesystem::exists(train) && std::filesystem::exists(eval)) return false;
  write_file(train, generate_corpus(/*seed=*/1, train_bytes));
  write_file(eval, generate_corpus(/*seed=*/2, eval_bytes));
  return true;
}

}  // namespace zoo::data
