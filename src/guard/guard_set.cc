// The guards of one entry parsed once, and lookup among the entries of one key.
#include <algorithm>
#include <string>

#include "aotcache/guard.h"

namespace aotcache {

Result<GuardSet> GuardSet::parse(std::span<const std::string> texts) {
  GuardSet set;
  set.guards_.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    Result<GuardExpr> g = parse_guard(texts[i]);
    if (!g.ok()) {
      return Status(g.status().code(),
                    "guard " + std::to_string(i) + " (" + texts[i].substr(0, 200) + "): " + g.status().message());
    }
    set.num_symbols_ = std::max(set.num_symbols_, g->num_symbols());
    set.guards_.push_back(std::move(g).value());
  }
  return set;
}

Result<std::optional<size_t>> GuardSet::first_failing(std::span<const int64_t> symbol_values) const {
  if (symbol_values.size() < num_symbols_) {
    return Status::invalid_argument("guards use s" + std::to_string(num_symbols_ - 1) + " but only " +
                                    std::to_string(symbol_values.size()) + " symbol values were given");
  }
  for (size_t i = 0; i < guards_.size(); ++i) {
    Result<bool> holds = evaluate_guard(guards_[i], symbol_values);
    if (!holds.ok()) {
      return Status(holds.status().code(), "guard " + std::to_string(i) + ": " + holds.status().message());
    }
    if (!*holds) return std::optional<size_t>(i);
  }
  return std::optional<size_t>();
}

Result<std::optional<size_t>> first_matching_entry(std::span<const GuardSet> entries,
                                                   std::span<const int64_t> symbol_values) {
  for (size_t e = 0; e < entries.size(); ++e) {
    if (symbol_values.size() < entries[e].num_symbols()) {
      return Status::invalid_argument("entry " + std::to_string(e) + " uses s" +
                                      std::to_string(entries[e].num_symbols() - 1) + " but only " +
                                      std::to_string(symbol_values.size()) + " symbol values were given");
    }
    bool all_hold = true;
    for (const GuardExpr& g : entries[e].guards()) {
      Result<bool> holds = evaluate_guard(g, symbol_values);
      if (!holds.ok() || !*holds) {  // an evaluation error is a mismatch: fail closed
        all_hold = false;
        break;
      }
    }
    if (all_hold) return std::optional<size_t>(e);
  }
  return std::optional<size_t>();
}

}  // namespace aotcache
