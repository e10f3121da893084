// Opening modelzoo's CSV data sets (data/csv_table.h) as map-style loaders.
// Defines: open_csv.
#pragma once

#include <memory>
#include <string>

#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

// A map-style loader over Source(options): a LoaderOptionError passes
// through (it names its own key); any other problem with the files, and
// fewer rows than batch_size, is reported at data_dir.
template <class Source, class Options>
std::unique_ptr<DataLoader> open_csv(const Options& o, const config::Origin& at) {
  for (const auto& dir : o.data_dir.items) require_directory(dir, at);
  std::shared_ptr<Source> source;
  try {
    source = std::make_shared<Source>(o);
  } catch (const LoaderOptionError&) {
    throw;
  } catch (const std::exception& e) {
    at.fail("data_dir", e.what());
  }
  if (source->num_samples() < o.batch_size)
    at.fail("data_dir", std::to_string(source->num_samples()) + " row(s), fewer than batch_size " +
                            std::to_string(o.batch_size));
  return std::make_unique<MapStyleLoader>(source, o);
}

}  // namespace zoo::data
