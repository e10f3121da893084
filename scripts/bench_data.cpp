// Data loader throughput: batches of a data processor read back to back,
// reported as tokens/s (input tokens delivered per second of wall time).
// Usage: zoo_bench_data PARAMS_SECTION_YAML SECONDS
//   e.g. zoo_bench_data '{data_processor: GptHDF5DataProcessor, data_dir: d, batch_size: 8}' 5
// Prints one line: "<tokens/s> tokens/s (<batches> batches in <s> s)".
#include <chrono>
#include <cstdio>
#include <iostream>

#include "data/registry.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: zoo_bench_data INPUT_SECTION_YAML SECONDS\n";
    return 2;
  }
  try {
    const YAML::Node section = YAML::Load(argv[1]);
    const zoo::config::Context ctx{"bench", "train_input", nullptr};
    auto loader = zoo::data::open_input(section, ctx);
    const double budget = std::stod(argv[2]);
    loader->next();  // opening costs (first chunk reads, worker start) are not throughput
    int64_t tokens = 0, batches = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double seconds = 0;
    while (seconds < budget) {
      tokens += loader->next().at("input_ids").numel();
      ++batches;
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::printf("%.0f tokens/s (%lld batches in %.2f s)\n", tokens / seconds, static_cast<long long>(batches), seconds);
  } catch (const std::exception& e) {
    std::cerr << "zoo_bench_data: " << e.what() << "\n";
    return 1;
  }
}
