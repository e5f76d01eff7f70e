// Summaries favour what a human compares when a key changes: counts, shapes, versions.
#include "key/summary.h"

#include <cstdio>
#include <map>

#include "key/canonical_encoder.h"

namespace aotcache::internal {

std::string truncate(std::string s) {
  if (s.size() <= k_summary_max_chars) return s;
  s.resize(k_summary_max_chars - 3);
  return s + "...";
}

namespace {

std::string join_ints(const std::vector<int64_t>& v) {
  std::string out;
  for (size_t k = 0; k < v.size(); ++k) {
    if (k) out += ", ";
    out += std::to_string(v[k]);
  }
  return out;
}

}  // namespace

std::string value_to_text(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.b ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.i);
    case Value::Kind::kFloat: {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", v.f);
      std::string s = buf;
      if (s.find_first_of(".eni") == std::string::npos) s += ".0";
      return s;
    }
    case Value::Kind::kString: return "'" + v.s + "'";
    case Value::Kind::kNodeRef: return "%" + std::to_string(v.i);
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      std::string out = v.kind == Value::Kind::kList ? "[" : "(";
      for (size_t k = 0; k < v.items.size(); ++k) {
        if (k) out += ", ";
        out += value_to_text(v.items[k]);
      }
      if (v.kind == Value::Kind::kTuple && v.items.size() == 1) out += ",";
      return out + (v.kind == Value::Kind::kList ? "]" : ")");
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      for (size_t k = 0; k + 1 < v.items.size(); k += 2) {
        if (k) out += ", ";
        out += value_to_text(v.items[k]) + ": " + value_to_text(v.items[k + 1]);
      }
      return out + "}";
    }
    case Value::Kind::kTorchEnum: return v.name;
    case Value::Kind::kSlice:
      return "slice(" + value_to_text(v.items[0]) + ", " + value_to_text(v.items[1]) + ", " +
             value_to_text(v.items[2]) + ")";
    case Value::Kind::kEllipsis: return "...";
    case Value::Kind::kSymExpr: return v.s;
  }
  return "?";
}

std::string summarize_graph(const Graph& graph) {
  size_t inputs = 0, calls = 0;
  std::map<std::string, int> ops;
  for (const Node& n : graph.nodes) {
    if (n.op == NodeOp::kPlaceholder) ++inputs;
    if (n.op == NodeOp::kCallFunction || n.op == NodeOp::kCallMethod || n.op == NodeOp::kCallModule) {
      ++calls;
      ++ops[n.target];
    }
  }
  std::string out = std::to_string(graph.nodes.size()) + " nodes, " + std::to_string(inputs) + " inputs, " +
                    std::to_string(calls) + " calls:";
  for (const auto& [target, count] : ops) out += " " + target + (count > 1 ? "x" + std::to_string(count) : "");
  return truncate(out);
}

std::string summarize_inputs(const std::vector<InputMeta>& inputs) {
  const Result<std::vector<int32_t>> groups = canonical_alias_groups(inputs);
  std::string out = std::to_string(inputs.size()) + " inputs";
  // Said up front as well: a long summary is cut, and the sharing may be all that differs.
  size_t sharing = 0;
  if (groups.ok()) {
    for (int32_t g : groups.value()) sharing += g >= 0 ? 1 : 0;
  }
  if (sharing > 0) out += " (" + std::to_string(sharing) + " sharing storage)";
  out += ":";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputMeta& in = inputs[i];
    if (in.tensor) {
      const TensorMeta& t = *in.tensor;
      if (t.is_symbolic()) {
        std::string dims;
        for (size_t k = 0; k < t.size_exprs.size(); ++k) dims += (k ? ", " : "") + t.size_exprs[k];
        out += " " + t.dtype + "[" + dims + "]";
      } else {
        out += " " + t.dtype + "[" + join_ints(t.sizes) + "]";
      }
      if (t.device != "cpu") out += "@" + t.device;
      if (t.requires_grad) out += "(grad)";
      // A tensor subclass keyed by content (a DTensor's spec): its text, which may be all that differs.
      if (t.tensor_type != "Tensor" && t.tensor_type != "Parameter") out += " " + t.tensor_type;
      if (groups.ok() && groups.value()[i] >= 0) out += "(alias " + std::to_string(groups.value()[i]) + ")";
    } else {
      out += " " + value_to_text(in.scalar);
    }
  }
  return truncate(out);
}

std::string summarize_dict(const Value& dict) {
  if (dict.kind != Value::Kind::kDict) return truncate(value_to_text(dict));
  std::string out;
  for (size_t k = 0; k + 1 < dict.items.size(); k += 2) {
    if (k) out += ", ";
    const Value& key = dict.items[k];
    const Value& val = dict.items[k + 1];
    out += key.kind == Value::Kind::kString ? key.s : value_to_text(key);
    out += "=";
    if (val.kind == Value::Kind::kDict) {
      out += "{" + std::to_string(val.items.size() / 2) + " fields}";
    } else {
      out += value_to_text(val);
    }
  }
  return truncate(out);
}

}  // namespace aotcache::internal
