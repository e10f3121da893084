// Tokenizer throughput: a tokenizer directory encodes a text file line by
// line on one thread, as create-hdf5 reads documents.
// Usage: zoo_bench_tokenizer TOKENIZER_DIR TEXT_FILE
// Prints one line: "<MB/s> MB/s <tokens> tokens <seconds> s <load seconds> load".
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "data/text/hf_tokenizer.h"
#include "data/text/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: zoo_bench_tokenizer TOKENIZER_DIR TEXT_FILE\n";
    return 2;
  }
  try {
    std::ifstream in(argv[2]);
    std::vector<std::string> lines;
    size_t bytes = 0;
    for (std::string line; std::getline(in, line);) bytes += line.size(), lines.push_back(std::move(line));
    const auto t0 = std::chrono::steady_clock::now();
    const auto tokenizer = zoo::text::load_huggingface_tokenizer(argv[1]);
    const auto t1 = std::chrono::steady_clock::now();
    size_t tokens = 0;
    for (const auto& line : lines) tokens += tokenizer->encode(line).size();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    std::printf("%.2f MB/s %zu tokens %.2f s %.2f load\n", bytes / 1e6 / seconds, tokens, seconds,
                std::chrono::duration<double>(t1 - t0).count());
  } catch (const std::exception& e) {
    std::cerr << "zoo_bench_tokenizer: " << e.what() << "\n";
    return 1;
  }
}
