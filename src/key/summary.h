// Short human summaries of key components, stored in the manifest beside each digest.
#pragma once

#include <string>
#include <vector>

#include "aotcache/ir.h"

namespace aotcache::internal {

constexpr size_t k_summary_max_chars = 200;

// `s` cut to k_summary_max_chars, ending in "..." when cut.
std::string truncate(std::string s);

std::string summarize_graph(const Graph& graph);
std::string summarize_inputs(const std::vector<InputMeta>& inputs);
// "grad_enabled=True, autocast={cpu:...}": top-level keys of a dict with scalar values shown and nested dicts counted.
std::string summarize_dict(const Value& dict);
// A value as Python would print it, for summaries and the readable graph form.
std::string value_to_text(const Value& v);

}  // namespace aotcache::internal
