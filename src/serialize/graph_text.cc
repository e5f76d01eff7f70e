// The readable forms of a captured graph: FX-like text and typed JSON.
#include "aotcache/graph_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "base/sha256.h"

namespace aotcache {
namespace {

// Length of the valid UTF-8 sequence starting at s[k], or 0 when the byte does not start one.
size_t utf8_length(std::string_view s, size_t k) {
  const auto c = static_cast<unsigned char>(s[k]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || k + n > s.size()) return 0;
  for (size_t j = 1; j < n; ++j) {
    if ((static_cast<unsigned char>(s[k + j]) >> 6) != 0x2) return 0;
  }
  return n;
}

std::string python_literal(std::string_view s) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out + "'";
}

// Valid UTF-8 passes through; control characters and bytes that are not valid UTF-8 become \u00XX.
void json_string(std::string_view s, std::string* out) {
  *out += '"';
  for (size_t k = 0; k < s.size();) {
    const auto c = static_cast<unsigned char>(s[k]);
    const size_t n = utf8_length(s, k);
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += static_cast<char>(c);
    } else if (n > 1 || (n == 1 && c >= 0x20)) {
      out->append(s.data() + k, n);
      k += n;
      continue;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      *out += buf;
    }
    ++k;
  }
  *out += '"';
}

std::string float_text(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  // The shortest text that reads back to the same double, as Python's repr: 1e-05, not 1.0000000000000001e-05.
  char buf[40];
  const auto end = std::to_chars(buf, buf + sizeof buf, f).ptr;
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string ints_text(const std::vector<int64_t>& v) {
  std::string out;
  for (size_t k = 0; k < v.size(); ++k) out += (k ? ", " : "") + std::to_string(v[k]);
  return out;
}

// Whether the strides are the row-major ones of the sizes. Sizes come from untrusted bytes: a product that
// overflows int64 (found by the fuzzer as signed-overflow UB) means "not contiguous", so the strides get printed.
bool contiguous(const TensorMeta& m) {
  if (m.strides.size() != m.sizes.size()) return false;
  int64_t expected = 1;
  for (size_t k = m.sizes.size(); k-- > 0;) {
    if (m.sizes[k] != 1 && m.strides[k] != expected) return false;
    if (k > 0 && __builtin_mul_overflow(expected, m.sizes[k], &expected)) return false;
  }
  return true;
}

std::string exprs_text(const std::vector<std::string>& v) {
  std::string out;
  for (size_t k = 0; k < v.size(); ++k) out += (k ? ", " : "") + v[k];
  return out;
}

// " alias=<group> storage=<n>B base=[sizes] stride=[...] offset=<o>" for an input sharing its storage, else "".
std::string alias_text(const TensorMeta& m) {
  if (!m.is_aliased()) return "";
  std::string out =
      " alias=" + std::to_string(m.alias_group) + " storage=" + std::to_string(m.alias_storage_nbytes) + "B";
  if (m.alias_base.has_value()) {
    out += " base=[" + ints_text(m.alias_base->sizes) + "] stride=[" + ints_text(m.alias_base->strides) +
           "] offset=" + std::to_string(m.alias_base->storage_offset);
  }
  return out;
}

// Symbolic tensors (dynamic shapes) show their size and stride expressions and, in parentheses, the example's.
std::string tensor_text(const TensorMeta& m) {
  if (!m.size_exprs.empty() || !m.stride_exprs.empty() || !m.storage_offset_expr.empty()) {
    std::string out = m.dtype + "[" + exprs_text(m.size_exprs) + "] " + m.device + " stride=[" +
                      exprs_text(m.stride_exprs) + "] offset=" + m.storage_offset_expr + " (example [" +
                      ints_text(m.sizes) + "])";
    if (m.tensor_type != "Tensor") out += " " + m.tensor_type;
    if (m.requires_grad) out += " requires_grad";
    return out + alias_text(m);
  }
  std::string out = m.dtype + "[" + ints_text(m.sizes) + "] " + m.device;
  if (!contiguous(m)) out += " stride=[" + ints_text(m.strides) + "]";
  if (m.storage_offset != 0) out += " offset=" + std::to_string(m.storage_offset);
  if (m.layout != "strided") out += " " + m.layout;
  if (m.tensor_type != "Tensor") out += " " + m.tensor_type;
  if (m.requires_grad) out += " requires_grad";
  if (m.is_pinned) out += " pinned";
  if (m.is_inference) out += " inference";
  return out + alias_text(m);
}

class TextPrinter {
 public:
  explicit TextPrinter(const CapturedGraph& cg) : cg_(cg) {}

  std::string run() {
    out_ += "inputs:\n";
    for (size_t k = 0; k < cg_.inputs.size(); ++k) out_ += "  " + std::to_string(k) + ": " + input(k) + "\n";
    out_ += "graph():\n";
    graph(cg_.graph, 1, true);
    return std::move(out_);
  }

 private:
  std::string input(size_t k) const {
    const InputMeta& in = cg_.inputs[k];
    std::string s = in.tensor ? tensor_text(*in.tensor) : "";
    if (in.scalar.kind != Value::Kind::kNone || !in.tensor) s += (s.empty() ? "" : " ") + value(in.scalar, nullptr);
    return s;
  }

  std::string ref(int64_t pos, const Graph* g) const {
    if (g != nullptr && pos >= 0 && static_cast<size_t>(pos) < g->nodes.size()) return "%" + g->nodes[pos].name;
    return "%" + std::to_string(pos);
  }

  std::string value(const Value& v, const Graph* g) const {
    switch (v.kind) {
      case Value::Kind::kNone: return "None";
      case Value::Kind::kBool: return v.b ? "True" : "False";
      case Value::Kind::kInt: return std::to_string(v.i);
      case Value::Kind::kFloat: return float_text(v.f);
      case Value::Kind::kString: return python_literal(v.s);
      case Value::Kind::kNodeRef: return ref(v.i, g);
      case Value::Kind::kList:
      case Value::Kind::kTuple: {
        std::string out = v.kind == Value::Kind::kList ? "[" : "(";
        for (size_t k = 0; k < v.items.size(); ++k) out += (k ? ", " : "") + value(v.items[k], g);
        if (v.kind == Value::Kind::kTuple && v.items.size() == 1) out += ",";
        return out + (v.kind == Value::Kind::kList ? "]" : ")");
      }
      case Value::Kind::kDict: {
        std::string out = "{";
        for (size_t k = 0; k + 1 < v.items.size(); k += 2) {
          out += (k ? ", " : "") + value(v.items[k], g) + ": " + value(v.items[k + 1], g);
        }
        return out + "}";
      }
      case Value::Kind::kTorchEnum: return v.s == "dtype" || v.s == "layout" ? "torch." + v.name : v.s + "." + v.name;
      case Value::Kind::kSlice: {
        std::string out = "slice(";
        for (size_t k = 0; k < v.items.size(); ++k) out += (k ? ", " : "") + value(v.items[k], g);
        return out + ")";
      }
      case Value::Kind::kEllipsis: return "...";
      case Value::Kind::kSymExpr: return "sym(" + v.s + ")";
    }
    return "?";
  }

  std::string named(const std::vector<std::pair<std::string, Value>>& kv, const Graph& g) const {
    std::string out;
    for (size_t k = 0; k < kv.size(); ++k) out += (k ? ", " : "") + kv[k].first + "=" + value(kv[k].second, &g);
    return out;
  }

  void graph(const Graph& g, int indent, bool top) {
    const std::string pad(static_cast<size_t>(indent) * 2, ' ');
    size_t placeholders = 0;
    for (const Node& n : g.nodes) {
      std::string line = pad + "%" + n.name + " = " + node_op_name(n.op) + "[" + n.target + "](";
      std::string args;
      for (size_t k = 0; k < n.args.size(); ++k) args += (k ? ", " : "") + value(n.args[k], &g);
      const std::string kwargs = named(n.kwargs, g);
      line += args + (!args.empty() && !kwargs.empty() ? ", " : "") + kwargs + ")";
      if (n.op == NodeOp::kPlaceholder && top && placeholders < cg_.inputs.size()) {
        line += " : " + input(placeholders);
      }
      if (n.op == NodeOp::kPlaceholder) ++placeholders;
      if (n.constant_meta) line += " : " + tensor_text(*n.constant_meta);
      if (!n.constant_digest.empty()) {
        line += " sha256:" + internal::to_hex(n.constant_digest).substr(0, 16);
        if (cg_.constants.count(n.constant_digest)) line += " (bytes stored)";
      }
      if (!n.subgraphs.empty()) line += " : subgraph";
      if (!n.meta.empty()) line += "  # meta {" + named(n.meta, g) + "}";
      out_ += line + "\n";
      for (const Graph& sub : n.subgraphs) graph(sub, indent + 1, false);
    }
  }

  const CapturedGraph& cg_;
  std::string out_;
};

class JsonPrinter {
 public:
  std::string run(const CapturedGraph& cg) {
    out_ += "{\"inputs\":[";
    for (size_t k = 0; k < cg.inputs.size(); ++k) {
      if (k) out_ += ',';
      out_ += '{';
      if (cg.inputs[k].tensor) {
        out_ += "\"tensor\":";
        tensor(*cg.inputs[k].tensor);
        out_ += ',';
      }
      out_ += "\"scalar\":";
      value(cg.inputs[k].scalar);
      out_ += '}';
    }
    out_ += "],\"nodes\":";
    graph(cg.graph);
    out_ += ",\"constants\":[";
    bool first = true;
    for (const auto& [digest, bytes] : cg.constants) {
      if (!first) out_ += ',';
      first = false;
      out_ += "{\"digest\":\"" + internal::to_hex(digest) + "\",\"bytes\":" + std::to_string(bytes.size()) + "}";
    }
    out_ += "]}";
    return std::move(out_);
  }

 private:
  void key(std::string_view k) {
    json_string(k, &out_);
    out_ += ':';
  }

  void ints(const std::vector<int64_t>& v) {
    out_ += '[';
    for (size_t k = 0; k < v.size(); ++k) out_ += (k ? "," : "") + std::to_string(v[k]);
    out_ += ']';
  }

  void tensor(const TensorMeta& m) {
    out_ += "{\"dtype\":";
    json_string(m.dtype, &out_);
    out_ += ",\"device\":";
    json_string(m.device, &out_);
    out_ += ",\"sizes\":";
    ints(m.sizes);
    out_ += ",\"strides\":";
    ints(m.strides);
    out_ += ",\"storage_offset\":" + std::to_string(m.storage_offset) + ",\"layout\":";
    json_string(m.layout, &out_);
    out_ += ",\"tensor_type\":";
    json_string(m.tensor_type, &out_);
    out_ += std::string(",\"requires_grad\":") + (m.requires_grad ? "true" : "false");
    out_ += std::string(",\"is_pinned\":") + (m.is_pinned ? "true" : "false");
    out_ += std::string(",\"is_inference\":") + (m.is_inference ? "true" : "false");
    if (!m.size_exprs.empty() || !m.stride_exprs.empty() || !m.storage_offset_expr.empty()) {
      for (const auto& [name, exprs] :
           {std::pair<const char*, const std::vector<std::string>*>{"size_exprs", &m.size_exprs},
            {"stride_exprs", &m.stride_exprs}}) {
        out_ += std::string(",\"") + name + "\":[";
        for (size_t k = 0; k < exprs->size(); ++k) {
          if (k) out_ += ',';
          json_string((*exprs)[k], &out_);
        }
        out_ += ']';
      }
      out_ += ",\"storage_offset_expr\":";
      json_string(m.storage_offset_expr, &out_);
    }
    if (m.is_aliased()) {
      out_ += ",\"alias_group\":" + std::to_string(m.alias_group) +
              ",\"alias_storage_nbytes\":" + std::to_string(m.alias_storage_nbytes) + ",\"alias_base\":";
      if (m.alias_base.has_value()) {
        out_ += "{\"sizes\":";
        ints(m.alias_base->sizes);
        out_ += ",\"strides\":";
        ints(m.alias_base->strides);
        out_ += ",\"storage_offset\":" + std::to_string(m.alias_base->storage_offset) + "}";
      } else {
        out_ += "null";
      }
    }
    out_ += '}';
  }

  void values(const std::vector<Value>& items) {
    out_ += '[';
    for (size_t k = 0; k < items.size(); ++k) {
      if (k) out_ += ',';
      value(items[k]);
    }
    out_ += ']';
  }

  void tagged(const char* tag, const std::vector<Value>& items) {
    out_ += std::string("{\"") + tag + "\":";
    values(items);
    out_ += '}';
  }

  void value(const Value& v) {
    switch (v.kind) {
      case Value::Kind::kNone: out_ += "null"; return;
      case Value::Kind::kBool: out_ += v.b ? "true" : "false"; return;
      case Value::Kind::kInt: out_ += std::to_string(v.i); return;
      case Value::Kind::kFloat: out_ += "{\"float\":\"" + float_text(v.f) + "\"}"; return;
      case Value::Kind::kString: json_string(v.s, &out_); return;
      case Value::Kind::kNodeRef: out_ += "{\"ref\":" + std::to_string(v.i) + "}"; return;
      case Value::Kind::kList: values(v.items); return;
      case Value::Kind::kTuple: tagged("tuple", v.items); return;
      case Value::Kind::kDict: tagged("dict", v.items); return;  // alternating key, value: keys need not be strings
      case Value::Kind::kTorchEnum:
        out_ += "{\"enum\":";
        json_string(v.s, &out_);
        out_ += ",\"name\":";
        json_string(v.name, &out_);
        out_ += '}';
        return;
      case Value::Kind::kSlice: tagged("slice", v.items); return;
      case Value::Kind::kEllipsis: out_ += "{\"ellipsis\":true}"; return;
      case Value::Kind::kSymExpr:
        out_ += "{\"sym\":";
        json_string(v.s, &out_);
        out_ += '}';
        return;
    }
    out_ += "null";
  }

  void named(const std::vector<std::pair<std::string, Value>>& kv) {
    out_ += '{';
    for (size_t k = 0; k < kv.size(); ++k) {
      if (k) out_ += ',';
      key(kv[k].first);
      value(kv[k].second);
    }
    out_ += '}';
  }

  void graph(const Graph& g) {
    out_ += '[';
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const Node& n = g.nodes[k];
      if (k) out_ += ',';
      out_ += "{\"name\":";
      json_string(n.name, &out_);
      out_ += std::string(",\"op\":\"") + node_op_name(n.op) + "\",\"target_kind\":\"" +
              target_kind_name(n.target_kind) + "\",\"target\":";
      json_string(n.target, &out_);
      out_ += ",\"args\":";
      values(n.args);
      out_ += ",\"kwargs\":";
      named(n.kwargs);
      if (!n.meta.empty()) {
        out_ += ",\"meta\":";
        named(n.meta);
      }
      if (n.constant_meta) {
        out_ += ",\"constant\":";
        tensor(*n.constant_meta);
      }
      if (!n.constant_digest.empty()) out_ += ",\"constant_digest\":\"" + internal::to_hex(n.constant_digest) + "\"";
      if (!n.subgraphs.empty()) {
        out_ += ",\"subgraphs\":[";
        for (size_t s = 0; s < n.subgraphs.size(); ++s) {
          if (s) out_ += ',';
          graph(n.subgraphs[s]);
        }
        out_ += ']';
      }
      out_ += '}';
    }
    out_ += ']';
  }

  std::string out_;
};

}  // namespace

std::string graph_to_text(const CapturedGraph& graph) {
  return TextPrinter(graph).run();
}

std::string graph_to_json(const CapturedGraph& graph) {
  return JsonPrinter().run(graph);
}

}  // namespace aotcache
