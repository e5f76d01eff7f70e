// Argument helpers shared by the subcommands.
#include <algorithm>

#include "cli/commands.h"

namespace aotcache::cli {

bool Invocation::flag(const std::string& name) const {
  return std::find(args.begin(), args.end(), name) != args.end();
}

std::vector<std::string> Invocation::positional() const {
  std::vector<std::string> result;
  for (const auto& a : args) {
    if (a.rfind("--", 0) != 0) result.push_back(a);
  }
  return result;
}

Result<std::string> resolve_key(LocalStore& store, const std::string& key_or_prefix) {
  if (is_valid_key_hex(key_or_prefix)) return key_or_prefix;
  if (key_or_prefix.size() < 4 || key_or_prefix.size() > 64 ||
      key_or_prefix.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Status::invalid_argument("'" + key_or_prefix + "' is not a key or a key prefix of at least 4 hex digits");
  }
  AOTCACHE_ASSIGN_OR_RETURN(auto entries, store.list());
  std::string found;
  for (const auto& e : entries) {
    if (e.key_hex.rfind(key_or_prefix, 0) == 0) {
      if (!found.empty()) return Status::invalid_argument("key prefix '" + key_or_prefix + "' is ambiguous");
      found = e.key_hex;
    }
  }
  if (found.empty()) return Status::not_found("no entry with key " + key_or_prefix);
  return found;
}

}  // namespace aotcache::cli
