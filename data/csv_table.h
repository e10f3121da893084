// modelzoo's CSV data sets (BERT's pre-training data): a data_dir holds
// meta.dat, lines "file.csv rows", and each file a header row and records
// whose list-valued fields are Python literals (str(list)). Only each row's
// byte offset is kept; rows are read and split when asked for.
// Defines: split_csv_record, parse_python_string_list, parse_python_int_list, CsvTable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zoo::data {

// Splits one CSV record (RFC 4180: quoted fields, "" inside quotes) into fields.
std::vector<std::string> split_csv_record(const std::string& line);
// The strings of a Python list literal as repr() writes them: ['a', "it's", '\\'].
// Throws std::invalid_argument on anything else.
std::vector<std::string> parse_python_string_list(const std::string& text);
// The integers of "[1, 2, 3]" (or "1 2 3"); std::invalid_argument on anything else.
std::vector<int64_t> parse_python_int_list(const std::string& text);

class CsvTable {
 public:
  // The rows meta.dat lists in each of `dirs`, in order; every file must have
  // the `required` columns. Throws std::runtime_error naming the file.
  CsvTable(const std::vector<std::string>& dirs, const std::vector<std::string>& required);
  int64_t size() const { return static_cast<int64_t>(rows_.size()); }
  std::string describe() const;  // the data_dir entries
  // "<file>, row <n>" (n counted from 1 after the header), for messages.
  std::string where(int64_t i) const;
  bool has_column(int64_t i, const std::string& name) const;

  class Row {
   public:
    // The field of `name`; std::runtime_error naming the row when it has none.
    const std::string& operator[](const std::string& name) const;

   private:
    friend class CsvTable;
    std::vector<std::string> fields_;
    const std::vector<std::string>* header_ = nullptr;
    std::string where_;
  };
  Row row(int64_t i) const;  // std::runtime_error naming the row when it cannot be read

 private:
  struct Offset {
    int32_t file;
    int64_t at;
  };
  std::vector<std::string> dirs_, files_;
  std::vector<std::vector<std::string>> headers_;
  std::vector<Offset> rows_;
};

}  // namespace zoo::data
