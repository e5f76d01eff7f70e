// Field-level differences between two encodings of a dict component: what `aotcache explain` and a logged miss show.
#include "aotcache/key.h"
#include "key/canonical_encoder.h"
#include "key/summary.h"

namespace aotcache {
namespace {

void diff(const Value& a, const Value& b, const std::string& path, size_t max_lines, std::vector<std::string>* out) {
  if (out->size() >= max_lines || a == b) return;
  if (a.kind == Value::Kind::kDict && b.kind == Value::Kind::kDict) {
    auto key_text = [](const Value& k) { return k.kind == Value::Kind::kString ? k.s : internal::value_to_text(k); };
    auto find = [](const Value& dict, const Value& key) -> const Value* {
      for (size_t k = 0; k + 1 < dict.items.size(); k += 2) {
        if (dict.items[k] == key) return &dict.items[k + 1];
      }
      return nullptr;
    };
    const std::string prefix = path.empty() ? "" : path + ".";
    for (size_t k = 0; k + 1 < a.items.size(); k += 2) {
      const Value* other = find(b, a.items[k]);
      if (other == nullptr) {
        if (out->size() < max_lines) out->push_back(prefix + key_text(a.items[k]) + ": only in A");
      } else {
        diff(a.items[k + 1], *other, prefix + key_text(a.items[k]), max_lines, out);
      }
    }
    for (size_t k = 0; k + 1 < b.items.size(); k += 2) {
      if (find(a, b.items[k]) == nullptr && out->size() < max_lines) {
        out->push_back(prefix + key_text(b.items[k]) + ": only in B");
      }
    }
    return;
  }
  std::string line =
      (path.empty() ? "value" : path) + ": " + internal::value_to_text(a) + " -> " + internal::value_to_text(b);
  if (line.size() > internal::k_summary_max_chars) line = line.substr(0, internal::k_summary_max_chars - 3) + "...";
  out->push_back(std::move(line));
}

Result<Value> decode_component(std::string_view encoded) {
  internal::ByteReader r(encoded);
  Value v;
  AOTCACHE_RETURN_IF_ERROR(internal::decode_value(&r, &v));
  if (!r.done()) return Status::corruption("trailing bytes after a component value");
  return v;
}

}  // namespace

Result<std::vector<std::string>> explain_component(std::string_view encoded_a, std::string_view encoded_b,
                                                   size_t max_lines) {
  AOTCACHE_ASSIGN_OR_RETURN(Value a, decode_component(encoded_a));
  AOTCACHE_ASSIGN_OR_RETURN(Value b, decode_component(encoded_b));
  std::vector<std::string> out;
  diff(a, b, "", max_lines, &out);
  return out;
}

}  // namespace aotcache
