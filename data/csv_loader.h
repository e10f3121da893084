// Opening modelzoo's CSV data sets (data/csv_table.h) as map-style loaders.
// Defines: open_map_source, open_csv.
#pragma once

#include <memory>
#include <string>

#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

// A map-style loader over Source(options), which reads `dirs` (the section's
// key `dirs_key`): a LoaderOptionError passes through (it names its own
// key); any other problem with the files, and fewer samples than
// batch_size, is reported at dirs_key.
template <class Source, class Options>
std::unique_ptr<DataLoader> open_map_source(const Options& o, const config::Origin& at, const config::PathList& dirs,
                                            const std::string& dirs_key) {
  for (const auto& dir : dirs.items) require_directory(dir, at);
  std::shared_ptr<Source> source;
  try {
    source = std::make_shared<Source>(o);
  } catch (const LoaderOptionError&) {
    throw;
  } catch (const std::exception& e) {
    at.fail(dirs_key, e.what());
  }
  if (source->num_samples() < o.batch_size)
    at.fail(dirs_key, std::to_string(source->num_samples()) + " sample(s), fewer than batch_size " +
                          std::to_string(o.batch_size));
  return std::make_unique<MapStyleLoader>(source, o);
}

// The CSV data sets' form: the rows meta.dat lists under data_dir.
template <class Source, class Options>
std::unique_ptr<DataLoader> open_csv(const Options& o, const config::Origin& at) {
  return open_map_source<Source>(o, at, o.data_dir, "data_dir");
}

}  // namespace zoo::data
