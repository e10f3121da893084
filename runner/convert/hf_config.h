// Reading a Hugging Face config.json for `zoo convert`: the file comes with
// downloaded weights, so it is checked before any converter reads it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace zoo::convert {

// The JSON object in `path`, or an error naming the file: it cannot be read,
// is not JSON, or is not an object (`expected` says what it should hold).
nlohmann::json read_json_object(const std::string& path, const std::string& expected);

// The JSON object in `path`. Counts (keys named num_*, n_*, *_size, *_dim,
// *_layers, *_heads, ... holding numbers) must be whole numbers >= 0, head
// counts >= 1; anything else is an error naming the file and the key.
nlohmann::json read_config_json(const std::string& path);

// A converter's nlohmann error (a missing or mistyped field) as a sentence
// naming the key, what was expected and the value found.
std::string describe_config_error(const nlohmann::json::exception& e, const nlohmann::json& config);

}  // namespace zoo::convert
