// A minimal JSON writer for the CLI's --json outputs (objects, arrays, strings, numbers, booleans).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace aotcache::cli {

std::string json_quote(std::string_view s);

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& string(std::string_view v);
  JsonWriter& integer(int64_t v);
  JsonWriter& number(double v);
  JsonWriter& boolean(bool v);
  JsonWriter& null();
  // REQUIRES: `json` is one complete JSON value (an object written by another module).
  JsonWriter& raw(std::string_view json);
  const std::string& text() const { return out_; }

 private:
  void separate();
  std::string out_;
  bool need_comma_ = false;
};

}  // namespace aotcache::cli
