// Reading and writing params YAML files with errors that name the file and line.
// Defines: load_yaml_file, load_yaml_string, write_yaml_file, format_field_table.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "configs/schema/schema.h"

namespace zoo::config {

// Throws ConfigError "FILE:LINE:COL: YAML syntax error: ..." or "FILE: cannot read ...",
// or names a key given twice with different values; a key repeated with the
// same value is a warning (into `warnings`, or stderr when null). Merge keys
// (`<<: *anchor`) are expanded as PyYAML expands them.
YAML::Node load_yaml_file(const std::string& path, std::vector<std::string>* warnings = nullptr);
YAML::Node load_yaml_string(const std::string& text, const std::string& name,
                            std::vector<std::string>* warnings = nullptr);
// Writes atomically (temp file + rename).
// `comment` (may be empty) goes first, each of its lines as a YAML comment.
void write_yaml_file(const std::string& path, const YAML::Node& node, const std::string& comment = "");
// A fixed-width "key  type  default  doc" table for --help-config and docs.
std::string format_field_table(const std::string& title, const std::vector<FieldInfo>& fields);

}  // namespace zoo::config
