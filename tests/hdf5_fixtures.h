// HDF5 files read back by h5py (Debian's python3-h5py), for the create-hdf5 tests.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace zoo::testing {

// Every *.h5 in `dir` as h5py sees it: {file: {shape, chunks, compression, n_examples, data}}.
inline nlohmann::json h5py_dump(const std::string& dir) {
  TempDir tmp;
  const std::string script = write_file(tmp / "dump.py", oracle("hdf5_dump.py"));
  const auto r = run_command("/usr/bin/python3 " + script + " " + dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

// The samples of every *.h5 in `dir`, in file order, each the rows
// input_ids, attention_mask and labels one after the other.
inline std::vector<std::vector<int32_t>> h5py_samples(const std::string& dir) {
  const nlohmann::json files = h5py_dump(dir);
  std::vector<std::vector<int32_t>> samples;
  for (size_t f = 0; files.contains("examples_" + std::to_string(f) + ".h5"); ++f)
    for (const auto& sample : files["examples_" + std::to_string(f) + ".h5"]["data"]) {
      std::vector<int32_t> row;
      for (const auto& r3 : sample) row.insert(row.end(), r3.begin(), r3.end());
      samples.push_back(row);
    }
  return samples;
}

}  // namespace zoo::testing
