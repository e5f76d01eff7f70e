// aotcache._core: thin nanobind bindings over the C++ core. Converts Python values to IR values and Status to
// exceptions; holds no logic of its own.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <climits>

#include "aotcache/check.h"
#include "aotcache/entry.h"
#include "aotcache/graph_text.h"
#include "aotcache/guard.h"
#include "aotcache/kernel_bundle.h"
#include "aotcache/key.h"
#include "aotcache/remote_store.h"
#include "aotcache/serialize.h"
#include "aotcache/store.h"
#include "base/sha256.h"
#include "env/fault_injecting_file_system.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace aotcache {
namespace {

// Python-side tags for IR values that have no plain Python equivalent.
struct NodeRef {
  int64_t position;
};
struct TorchEnum {
  std::string category;
  std::string name;
};
struct Slice {
  nb::object start, stop, step;
};
struct EllipsisTag {};

// A symbolic integer expression over the graph's canonical size symbols ("2*s0").
struct SymExpr {
  std::string text;
};

// A Status crossing into Python. Translated to the exception class of its code.
struct StatusError {
  Status status;
};
// A Python value the IR cannot hold: the capture layer turns it into a bypass that names the node.
struct UnencodableValue {
  std::string message;
};

// Exception types live as long as the process (module state is never torn down in CPython's main interpreter).
PyObject* g_cache_error = nullptr;
PyObject* g_corrupt_entry_error = nullptr;
PyObject* g_cache_io_error = nullptr;
PyObject* g_unencodable_error = nullptr;
PyObject* g_incompatible_entry_error = nullptr;
PyObject* g_untrusted_entry_error = nullptr;
PyObject* g_remote_unavailable_error = nullptr;

[[noreturn]] void raise(const Status& s) {
  throw StatusError{s};
}

template <typename T>
T unwrap(Result<T> r) {
  if (!r.ok()) raise(r.status());
  return std::move(r).value();
}

void check(const Status& s) {
  if (!s.ok()) raise(s);
}

Value to_value(nb::handle h, int depth) {
  if (depth > 64) throw UnencodableValue{"cannot encode a value nested deeper than 64"};
  PyObject* o = h.ptr();
  if (o == Py_None) return Value::none();
  if (PyBool_Check(o)) return Value::boolean(o == Py_True);
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0) throw UnencodableValue{"cannot encode an integer wider than 64 bits"};
    return Value::integer(v);
  }
  if (PyFloat_CheckExact(o)) return Value::floating(PyFloat_AS_DOUBLE(o));
  if (PyUnicode_CheckExact(o)) return Value::string(nb::cast<std::string>(h));
  if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
    std::vector<Value> items;
    for (nb::handle item : h) items.push_back(to_value(item, depth + 1));
    return PyList_CheckExact(o) ? Value::list(std::move(items)) : Value::tuple(std::move(items));
  }
  if (PyDict_CheckExact(o)) {
    std::vector<Value> items;
    for (auto [k, v] : nb::borrow<nb::dict>(h)) {
      items.push_back(to_value(k, depth + 1));
      items.push_back(to_value(v, depth + 1));
    }
    return Value::dict(std::move(items));
  }
  if (nb::isinstance<NodeRef>(h)) return Value::node_ref(nb::cast<NodeRef&>(h).position);
  if (nb::isinstance<TorchEnum>(h)) {
    auto& e = nb::cast<TorchEnum&>(h);
    return Value::torch_enum(e.category, e.name);
  }
  if (nb::isinstance<Slice>(h)) {
    auto& s = nb::cast<Slice&>(h);
    return Value::slice(to_value(s.start, depth + 1), to_value(s.stop, depth + 1), to_value(s.step, depth + 1));
  }
  if (nb::isinstance<EllipsisTag>(h)) return Value::ellipsis();
  if (nb::isinstance<SymExpr>(h)) return Value::sym_expr(nb::cast<SymExpr&>(h).text);
  throw UnencodableValue{"cannot encode an object of type " +
                         nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(o)))))};
}

nb::object from_value(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNone: return nb::none();
    case Value::Kind::kBool: return nb::bool_(v.b);
    case Value::Kind::kInt: return nb::int_(v.i);
    case Value::Kind::kFloat: return nb::float_(v.f);
    case Value::Kind::kString: return nb::str(v.s.c_str(), v.s.size());
    case Value::Kind::kDict: {
      nb::dict d;
      for (size_t k = 0; k + 1 < v.items.size(); k += 2) d[from_value(v.items[k])] = from_value(v.items[k + 1]);
      return d;
    }
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      nb::list l;
      for (const Value& item : v.items) l.append(from_value(item));
      return v.kind == Value::Kind::kList ? nb::object(l) : nb::object(nb::tuple(l));
    }
    default: return nb::str("<unrepresentable>");
  }
}

std::vector<std::tuple<std::string, std::string, std::string>> manifest_rows(const Manifest& m) {
  std::vector<std::tuple<std::string, std::string, std::string>> rows;
  for (const auto& c : m.components) rows.emplace_back(c.name, internal::to_hex(c.digest), c.summary);
  return rows;
}

Manifest manifest_from_rows(const std::vector<std::tuple<std::string, std::string, std::string>>& rows) {
  Manifest m;
  for (const auto& [name, digest_hex, summary] : rows) {
    std::string raw;
    if (!internal::from_hex(digest_hex, &raw)) raise(Status::invalid_argument("manifest digest is not hex"));
    m.components.push_back({name, raw, summary});
  }
  return m;
}

TensorMeta make_tensor_meta(std::string dtype, std::string device, std::vector<int64_t> sizes,
                            std::vector<int64_t> strides, int64_t storage_offset, bool requires_grad,
                            std::string layout, bool is_pinned, std::string tensor_type, bool is_inference,
                            std::vector<std::string> size_exprs, std::vector<std::string> stride_exprs,
                            std::string storage_offset_expr, int32_t alias_group, int64_t alias_storage_nbytes,
                            std::optional<std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t>> alias_base) {
  TensorMeta m;
  m.dtype = std::move(dtype);
  m.device = std::move(device);
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.storage_offset = storage_offset;
  m.requires_grad = requires_grad;
  m.layout = std::move(layout);
  m.is_pinned = is_pinned;
  m.tensor_type = std::move(tensor_type);
  m.is_inference = is_inference;
  m.size_exprs = std::move(size_exprs);
  m.stride_exprs = std::move(stride_exprs);
  m.storage_offset_expr = std::move(storage_offset_expr);
  m.alias_group = alias_group;
  m.alias_storage_nbytes = alias_storage_nbytes;
  if (alias_base.has_value()) {
    auto& [base_sizes, base_strides, base_offset] = *alias_base;
    m.alias_base = AliasBase{std::move(base_sizes), std::move(base_strides), base_offset};
  }
  return m;
}

const char* guard_op_name(GuardOp op) {
  switch (op) {
    case GuardOp::kInt: return "int";
    case GuardOp::kBool: return "bool";
    case GuardOp::kSymbol: return "sym";
    case GuardOp::kNeg: return "neg";
    case GuardOp::kAdd: return "add";
    case GuardOp::kSub: return "sub";
    case GuardOp::kMul: return "mul";
    case GuardOp::kFloorDiv: return "floordiv";
    case GuardOp::kMod: return "mod";
    case GuardOp::kPow: return "pow";
    case GuardOp::kIntTrueDiv: return "int_truediv";
    case GuardOp::kMin: return "min";
    case GuardOp::kMax: return "max";
    case GuardOp::kAbs: return "abs";
    case GuardOp::kEq: return "eq";
    case GuardOp::kNe: return "ne";
    case GuardOp::kLt: return "lt";
    case GuardOp::kLe: return "le";
    case GuardOp::kGt: return "gt";
    case GuardOp::kGe: return "ge";
    case GuardOp::kAnd: return "and";
    case GuardOp::kOr: return "or";
    case GuardOp::kNot: return "not";
  }
  return "unknown";
}

NodeOp parse_op(const std::string& op) {
  static const std::pair<const char*, NodeOp> k_ops[] = {
      {"placeholder", NodeOp::kPlaceholder},    {"get_attr", NodeOp::kGetAttr},
      {"call_function", NodeOp::kCallFunction}, {"call_method", NodeOp::kCallMethod},
      {"call_module", NodeOp::kCallModule},     {"output", NodeOp::kOutput}};
  for (const auto& [name, value] : k_ops) {
    if (op == name) return value;
  }
  raise(Status::invalid_argument("unknown node op '" + op + "'"));
}

TargetKind parse_target_kind(const std::string& kind) {
  for (int k = 0; k <= static_cast<int>(TargetKind::kSubgraph); ++k) {
    if (kind == target_kind_name(static_cast<TargetKind>(k))) return static_cast<TargetKind>(k);
  }
  raise(Status::invalid_argument("unknown target kind '" + kind + "'"));
}

// Graph inputs as the capture layer lists them: TensorMeta objects and plain scalars.
std::vector<InputMeta> input_metas(nb::list inputs) {
  std::vector<InputMeta> out;
  for (nb::handle item : inputs) {
    InputMeta im;
    if (nb::isinstance<TensorMeta>(item)) {
      im.tensor = nb::cast<TensorMeta>(item);
    } else {
      im.scalar = to_value(item, 0);
    }
    out.push_back(std::move(im));
  }
  return out;
}

CapturedGraph parse_graph_bytes(nb::bytes data) {
  return unwrap(deserialize_graph(std::string_view(data.c_str(), data.size())));
}

// An entry as Python sees it after a successful, verified read.
// A held compile lock (LocalStore::try_compile_lock), released by release(), `with`, or when collected.
struct CompileLock {
  std::unique_ptr<FileLock> lock;
  void release() { lock.reset(); }
};

struct LoadedEntry {
  std::string key;
  nb::bytes payload;
  nb::bytes graph;    // serialized graph, b"" for entries written without one
  nb::bytes kernels;  // kernel bundle, b"" for entries written without one
  std::vector<std::tuple<std::string, std::string, std::string>> manifest;
  nb::object metadata;
  nb::dict component_values;  // component name -> canonical encoding (bytes)
};

nb::dict component_values_dict(const ComponentValues& values) {
  nb::dict d;
  for (const auto& [name, bytes] : values) d[name.c_str()] = nb::bytes(bytes.data(), bytes.size());
  return d;
}

LoadedEntry loaded_entry(const std::string& key, const Entry& e);

}  // namespace
}  // namespace aotcache

namespace aotcache {
namespace {

LoadedEntry loaded_entry(const std::string& key, const Entry& e) {
  return LoadedEntry{key,
                     nb::bytes(e.payload.data(), e.payload.size()),
                     nb::bytes(e.graph.data(), e.graph.size()),
                     nb::bytes(e.kernels.data(), e.kernels.size()),
                     manifest_rows(e.manifest),
                     from_value(e.metadata),
                     component_values_dict(e.component_values)};
}

// LocalStore.open's keywords -> StoreOptions. CacheError (InvalidArgument) for an unknown policy or malformed keys;
// the message never contains a secret.
StoreOptions store_options(uint64_t max_size, const std::string& eviction,
                           const std::optional<std::string>& signing_key,
                           const std::vector<std::string>& accepted_keys) {
  StoreOptions o;
  o.max_size = max_size;
  o.eviction = unwrap(parse_eviction_policy(eviction));
  o.signing = unwrap(make_signing_keys(signing_key.value_or(""), accepted_keys));
  return o;
}

}  // namespace
}  // namespace aotcache

NB_MODULE(_core, m) {
  using namespace aotcache;
  m.doc() = "aotcache's C++ core: graph IR, cache key, cacheability checks, entry format and local store.";
  m.attr("__version__") = AOTCACHE_VERSION;
  // torch keeps compiled callables (and through them our objects) alive past interpreter shutdown; nanobind would
  // report those as leaks on every exit of a training job.
  nb::set_leak_warnings(false);
  m.attr("KEY_SCHEMA_VERSION") = k_key_schema_version;
  m.attr("ENTRY_FORMAT_VERSION") = k_entry_format_version;

  g_cache_error = PyErr_NewException("aotcache._core.CacheError", PyExc_RuntimeError, nullptr);
  g_corrupt_entry_error = PyErr_NewException("aotcache._core.CorruptEntryError", g_cache_error, nullptr);
  g_cache_io_error = PyErr_NewException("aotcache._core.CacheIOError", g_cache_error, nullptr);
  g_unencodable_error = PyErr_NewException("aotcache._core.UnencodableError", g_cache_error, nullptr);
  g_incompatible_entry_error = PyErr_NewException("aotcache._core.IncompatibleEntryError", g_cache_error, nullptr);
  // Not a CorruptEntryError: an entry not signed by an accepted key is left in place (another key set's, maybe).
  g_untrusted_entry_error = PyErr_NewException("aotcache._core.UntrustedEntryError", g_cache_error, nullptr);
  g_remote_unavailable_error = PyErr_NewException("aotcache._core.RemoteUnavailableError", g_cache_error, nullptr);
  m.attr("CacheError") = nb::handle(g_cache_error);
  m.attr("CorruptEntryError") = nb::handle(g_corrupt_entry_error);
  m.attr("CacheIOError") = nb::handle(g_cache_io_error);
  m.attr("UnencodableError") = nb::handle(g_unencodable_error);
  m.attr("IncompatibleEntryError") = nb::handle(g_incompatible_entry_error);
  m.attr("UntrustedEntryError") = nb::handle(g_untrusted_entry_error);
  m.attr("RemoteUnavailableError") = nb::handle(g_remote_unavailable_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const UnencodableValue& e) {
      PyErr_SetString(g_unencodable_error, e.message.c_str());
    } catch (const StatusError& e) {
      PyObject* type = g_cache_error;
      switch (e.status.code()) {
        case StatusCode::kCorruption: type = g_corrupt_entry_error; break;
        case StatusCode::kUnsupported: type = g_incompatible_entry_error; break;  // e.g. a newer entry format
        case StatusCode::kIOError: type = g_cache_io_error; break;
        case StatusCode::kUnauthenticated: type = g_untrusted_entry_error; break;
        case StatusCode::kUnavailable: type = g_remote_unavailable_error; break;
        default: break;
      }
      PyErr_SetString(type, e.status.to_string().c_str());
    }
  });

  nb::class_<NodeRef>(m, "NodeRef")
      .def(nb::init<int64_t>(), "position"_a)
      .def_ro("position", &NodeRef::position)
      .def("__repr__", [](const NodeRef& r) { return "NodeRef(" + std::to_string(r.position) + ")"; });
  nb::class_<TorchEnum>(m, "TorchEnum")
      .def(nb::init<std::string, std::string>(), "category"_a, "name"_a)
      .def_ro("category", &TorchEnum::category)
      .def_ro("name", &TorchEnum::name);
  nb::class_<Slice>(m, "Slice")
      .def(nb::init<nb::object, nb::object, nb::object>(), "start"_a.none(), "stop"_a.none(), "step"_a.none());
  nb::class_<EllipsisTag>(m, "EllipsisTag").def(nb::init<>());
  nb::class_<SymExpr>(m, "SymExpr").def(nb::init<std::string>(), "text"_a).def_ro("text", &SymExpr::text);

  nb::class_<TensorMeta>(m, "TensorMeta")
      .def(nb::new_(&make_tensor_meta), "dtype"_a, "device"_a, "sizes"_a, "strides"_a, "storage_offset"_a = 0,
           "requires_grad"_a = false, "layout"_a = "strided", "is_pinned"_a = false, "tensor_type"_a = "Tensor",
           "is_inference"_a = false, "size_exprs"_a = std::vector<std::string>{},
           "stride_exprs"_a = std::vector<std::string>{}, "storage_offset_expr"_a = "", "alias_group"_a = -1,
           "alias_storage_nbytes"_a = 0, "alias_base"_a.none() = nb::none())
      .def_ro("dtype", &TensorMeta::dtype)
      .def_ro("sizes", &TensorMeta::sizes)
      .def_ro("requires_grad", &TensorMeta::requires_grad)
      .def_ro("alias_group", &TensorMeta::alias_group)
      .def_ro("alias_storage_nbytes", &TensorMeta::alias_storage_nbytes)
      .def_prop_ro("alias_base", [](const TensorMeta& t) -> nb::object {
        if (!t.alias_base.has_value()) return nb::none();
        return nb::make_tuple(t.alias_base->sizes, t.alias_base->strides, t.alias_base->storage_offset);
      });

  nb::class_<Graph>(m, "Graph")
      .def(nb::init<>())
      .def(
          "add_node",
          [](Graph& g, std::string name, const std::string& op, const std::string& target_kind, std::string target,
             nb::handle args, nb::handle kwargs, std::optional<TensorMeta> constant_meta,
             std::optional<nb::bytes> constant_bytes, std::optional<nb::dict> meta, std::optional<Graph> subgraph) {
            Node n;
            n.name = std::move(name);
            n.op = parse_op(op);
            n.target_kind = parse_target_kind(target_kind);
            n.target = std::move(target);
            for (nb::handle a : args) n.args.push_back(to_value(a, 0));
            for (auto [k, v] : nb::borrow<nb::dict>(kwargs)) {
              n.kwargs.emplace_back(nb::cast<std::string>(k), to_value(v, 0));
            }
            if (constant_meta.has_value()) {
              n.constant_meta = std::move(constant_meta);
              if (!constant_bytes.has_value()) raise(Status::invalid_argument("a constant needs its bytes"));
              n.constant_digest = internal::sha256(std::string_view(constant_bytes->c_str(), constant_bytes->size()));
            }
            if (meta.has_value()) {
              for (auto [k, v] : *meta) n.meta.emplace_back(nb::cast<std::string>(k), to_value(v, 0));
            }
            if (subgraph.has_value()) n.subgraphs.push_back(std::move(*subgraph));
            g.nodes.push_back(std::move(n));
            return static_cast<int64_t>(g.nodes.size() - 1);
          },
          "name"_a, "op"_a, "target_kind"_a, "target"_a, "args"_a, "kwargs"_a, "constant_meta"_a = nb::none(),
          "constant_bytes"_a = nb::none(), "meta"_a = nb::none(), "subgraph"_a = nb::none(),
          "Appends a node; returns its position. Raises UnencodableError for a value the IR cannot hold.")
      .def("__len__", [](const Graph& g) { return g.nodes.size(); });

  m.def(
      "check_graph",
      [](const Graph& g) -> std::optional<std::pair<std::string, std::string>> {
        auto r = check_graph(g);
        if (!r) return std::nullopt;
        return std::make_pair(r->code, r->message);
      },
      "graph"_a, "(reason_code, message) of the first node that is not cacheable, or None.");

  nb::class_<CacheKey>(m, "CacheKey")
      .def_prop_ro("hex", &CacheKey::hex)
      .def_prop_ro("manifest", [](const CacheKey& k) { return manifest_rows(k.manifest); })
      .def_prop_ro("component_values", [](const CacheKey& k) { return component_values_dict(k.component_values); });

  m.def(
      "explain_component",
      [](nb::bytes a, nb::bytes b, size_t max_lines) {
        return unwrap(
            explain_component(std::string_view(a.c_str(), a.size()), std::string_view(b.c_str(), b.size()), max_lines));
      },
      "a"_a, "b"_a, "max_lines"_a = 20, "Field-level differences of two encodings of one dict component.");

  m.def(
      "compute_key",
      [](const Graph& g, nb::list inputs, nb::dict autograd_state, nb::dict config, nb::dict environment,
         nb::dict user) {
        KeyInputs in;
        in.graph = &g;
        in.inputs = input_metas(inputs);
        in.autograd_state = to_value(autograd_state, 0);
        in.config = to_value(config, 0);
        in.environment = to_value(environment, 0);
        in.user = to_value(user, 0);
        nb::gil_scoped_release release;
        return unwrap(compute_key(in));
      },
      "graph"_a, "inputs"_a, "autograd_state"_a, "config"_a, "environment"_a, "user"_a);

  m.def(
      "compute_frame_key",
      [](const std::string& code_digest, const std::string& code_name, nb::dict config, nb::dict environment,
         nb::dict user) {
        FrameKeyInputs in;
        in.code_digest = code_digest;
        in.code_name = code_name;
        in.config = to_value(config, 0);
        in.environment = to_value(environment, 0);
        in.user = to_value(user, 0);
        return unwrap(compute_frame_key(in));
      },
      "code_digest"_a, "code_name"_a, "config"_a, "environment"_a, "user"_a,
      "The key of a frame entry (docs/formats/frame-entry-format.md). Raises CacheError for a malformed input.");

  m.def(
      "serialize_graph",
      [](const Graph& g, nb::list inputs, std::optional<nb::dict> constants, uint64_t max_constant_bytes) {
        CapturedGraph cg;
        cg.graph = g;
        cg.inputs = input_metas(inputs);
        if (constants.has_value()) {
          for (auto [k, v] : *constants) {
            auto digest = nb::cast<nb::bytes>(k);
            auto bytes = nb::cast<nb::bytes>(v);
            cg.constants[std::string(digest.c_str(), digest.size())] = std::string(bytes.c_str(), bytes.size());
          }
        }
        SerializeOptions o;
        o.max_constant_bytes = max_constant_bytes;
        std::string bytes;
        {
          nb::gil_scoped_release release;
          bytes = unwrap(serialize_graph(cg, o));
        }
        return nb::bytes(bytes.data(), bytes.size());
      },
      "graph"_a, "inputs"_a, "constants"_a = nb::none(), "max_constant_bytes"_a = 1u << 20,
      "The graph format bytes (docs/formats/graph-format.md) of a captured graph and its inputs; `constants` maps "
      "SHA-256 digests (raw bytes) to constant bytes. Raises CacheError for a graph the format refuses.");
  m.def(
      "graph_to_text", [](nb::bytes data) { return graph_to_text(parse_graph_bytes(data)); }, "data"_a,
      "The FX-like listing of serialized graph bytes. Raises CorruptEntryError or IncompatibleEntryError.");
  m.def(
      "graph_to_json", [](nb::bytes data) { return graph_to_json(parse_graph_bytes(data)); }, "data"_a,
      "The JSON form of serialized graph bytes. Raises CorruptEntryError or IncompatibleEntryError.");
  m.def(
      "select_guarded",
      [](const std::vector<std::vector<std::string>>& candidates, const std::vector<int64_t>& sizes) {
        // Each candidate's guards are parsed and evaluated here, in C++; text that does not parse rejects the
        // candidate (with its reason), it is never evaluated any other way.
        std::vector<std::string> rejected;
        for (size_t i = 0; i < candidates.size(); ++i) {
          auto set = GuardSet::parse(candidates[i]);
          if (!set.ok()) {
            rejected.push_back("candidate " + std::to_string(i) + " rejected: " + set.status().message());
            continue;
          }
          auto failing = set->first_failing(sizes);
          if (!failing.ok()) {
            rejected.push_back("candidate " + std::to_string(i) + " rejected: " + failing.status().message());
          } else if (!failing->has_value()) {
            return std::make_pair(std::optional<size_t>(i), rejected);
          } else {
            rejected.push_back("candidate " + std::to_string(i) + ": " + candidates[i][**failing] + " is false");
          }
        }
        return std::make_pair(std::optional<size_t>(), rejected);
      },
      "candidates"_a, "sizes"_a,
      "(index of the first candidate whose guards all hold for `sizes` (s0, s1, ...) or None, reasons the others "
      "were rejected).");
  m.def(
      "guard_tree",
      [](const std::string& text) {
        auto parsed = parse_guard(text);
        if (!parsed.ok()) raise(parsed.status());
        // Postfix -> nested tuples ("op", operand...) with leaves ("int", v), ("bool", b), ("sym", i).
        std::vector<nb::object> stack;
        for (const GuardNode& n : parsed->nodes()) {
          const char* name = guard_op_name(n.op);
          if (n.op == GuardOp::kInt || n.op == GuardOp::kSymbol) {
            stack.push_back(nb::make_tuple(name, n.value));
            continue;
          }
          if (n.op == GuardOp::kBool) {
            stack.push_back(nb::make_tuple(name, n.value != 0));
            continue;
          }
          nb::list items;
          items.append(nb::str(name));
          const size_t first = stack.size() - n.arity;
          for (size_t k = first; k < stack.size(); ++k) items.append(stack[k]);
          stack.resize(first);
          stack.push_back(nb::tuple(items));
        }
        return stack.back();
      },
      "text"_a, "A guard's parsed form as nested tuples, for installing it into a ShapeEnv. Raises CacheError.");
  m.def("with_guards", &with_guards, "key"_a, "guards"_a,
        "The key of one compiled candidate of a symbolic graph: `key` plus a 'guards' component.");

  m.def(
      "differing_components",
      [](const std::vector<std::tuple<std::string, std::string, std::string>>& a,
         const std::vector<std::tuple<std::string, std::string, std::string>>& b) {
        return differing_components(manifest_from_rows(a), manifest_from_rows(b));
      },
      "a"_a, "b"_a);
  m.def(
      "default_cache_dir",
      [](const std::string& aotcache_dir, const std::string& xdg_cache_home, const std::string& home) {
        return default_cache_dir(aotcache_dir, xdg_cache_home, home);
      },
      "aotcache_dir"_a, "xdg_cache_home"_a, "home"_a,
      "The default cache directory from the values of AOTCACHE_DIR, XDG_CACHE_HOME and HOME ('' = unset).");
  m.def(
      "signing_key_ids",
      [](const std::optional<std::string>& signing_key, const std::vector<std::string>& accepted_keys) {
        std::vector<std::string> ids;
        for (const SigningKey& k : unwrap(make_signing_keys(signing_key.value_or(""), accepted_keys)).keys) {
          ids.push_back(k.id);
        }
        return ids;
      },
      "signing_key"_a, "accepted_keys"_a = std::vector<std::string>(),
      "The key ids a store opened with these keys uses (the first signs; [] = signing off). Raises CacheError for "
      "malformed keys (the message never contains a secret).");
  m.def(
      "parse_size", [](const std::string& text) { return unwrap(parse_size(text)); }, "text"_a,
      "'10G', '500M', '4096' -> bytes (binary units). Raises CacheError.");
  m.attr("DEFAULT_MAX_SIZE") = k_default_max_size;

  m.def(
      "encode_kernel_bundle",
      [](const std::string& fingerprint, const std::vector<std::pair<std::string, nb::bytes>>& files) {
        KernelBundle b;
        b.fingerprint = fingerprint;
        for (const auto& [path, data] : files) b.files.push_back({path, std::string(data.c_str(), data.size())});
        std::string out = unwrap(encode_kernel_bundle(b));
        return nb::bytes(out.data(), out.size());
      },
      "fingerprint"_a, "files"_a,
      "The kernel bundle bytes (docs/formats/kernel-bundle-format.md) of (relative path, contents) pairs built on the "
      "machine `fingerprint` describes. Raises CacheError for a path the format refuses.");
  m.def(
      "kernel_bundle_contents",
      [](nb::bytes data) {
        KernelBundle b = unwrap(decode_kernel_bundle(std::string_view(data.c_str(), data.size())));
        std::vector<std::pair<std::string, size_t>> files;
        for (const auto& f : b.files) files.emplace_back(f.path, f.bytes.size());
        return std::make_pair(b.fingerprint, files);
      },
      "data"_a,
      "(fingerprint, [(path, size), ...]) of kernel bundle bytes. Raises CorruptEntryError or "
      "IncompatibleEntryError.");
  m.def(
      "install_kernel_bundle",
      [](nb::bytes data, const std::string& dir) {
        KernelBundle b = unwrap(decode_kernel_bundle(std::string_view(data.c_str(), data.size())));
        nb::gil_scoped_release release;
        KernelInstallReport r = unwrap(install_kernel_bundle(default_file_system(), b, dir));
        return std::make_pair(r.installed, r.present);
      },
      "data"_a, "dir"_a,
      "Writes the bundle's files missing under `dir` (temp file + rename, never over an existing file); returns "
      "(installed, present). Raises CorruptEntryError for bad bytes, CacheIOError when a file cannot be written.");

  nb::class_<LoadedEntry>(m, "LoadedEntry")
      .def_ro("key", &LoadedEntry::key)
      .def_ro("payload", &LoadedEntry::payload)
      .def_ro("graph", &LoadedEntry::graph)
      .def_ro("kernels", &LoadedEntry::kernels)
      .def_ro("manifest", &LoadedEntry::manifest)
      .def_ro("metadata", &LoadedEntry::metadata)
      .def_ro("component_values", &LoadedEntry::component_values);

  nb::class_<LocalStore>(m, "LocalStore")
      .def_static(
          "open",
          [](const std::string& dir, uint64_t max_size, const std::string& eviction,
             const std::optional<std::string>& signing_key, const std::vector<std::string>& accepted_keys) {
            return unwrap(LocalStore::open(dir, store_options(max_size, eviction, signing_key, accepted_keys)));
          },
          "dir"_a, nb::kw_only(), "max_size"_a = k_default_max_size, "eviction"_a = "lru", "signing_key"_a = nb::none(),
          "accepted_keys"_a = std::vector<std::string>(),
          "Opens (creating when missing) a cache directory with these options (settings.store_options builds them "
          "from the settings). Raises CacheIOError, or CacheError for an unknown policy or malformed keys.")
      .def_static(
          "open_with_fault",
          [](const std::string& dir, const std::string& fault, uint64_t max_size, const std::string& eviction,
             const std::optional<std::string>& signing_key, const std::vector<std::string>& accepted_keys) {
            // Test hook: the store runs over a fault-injecting file system that lives as long as the process
            // (a few per test process; never used by the backend itself).
            static std::vector<std::unique_ptr<FaultInjectingFileSystem>> k_file_systems;
            auto parsed = unwrap(parse_fault(fault));
            k_file_systems.push_back(std::make_unique<FaultInjectingFileSystem>(default_file_system()));
            FaultInjectingFileSystem* fs = k_file_systems.back().get();
            auto store =
                unwrap(LocalStore::open(dir, store_options(max_size, eviction, signing_key, accepted_keys), fs));
            fs->set_fault(parsed);
            return store;
          },
          "dir"_a, "fault"_a, nb::kw_only(), "max_size"_a = k_default_max_size, "eviction"_a = "lru",
          "signing_key"_a = nb::none(), "accepted_keys"_a = std::vector<std::string>(),
          "For tests: opens the directory without faults, then injects `fault` into every later call (enospc, "
          "erofs, eacces, fsync, rename, short_read, corrupt_read). Raises CacheError for an unknown fault.")
      .def_prop_ro("dir", &LocalStore::dir)
      .def("entry_path", &LocalStore::entry_path, "key"_a)
      .def(
          "contains", [](LocalStore& s, const std::string& key) { return unwrap(s.contains(key)); }, "key"_a,
          "Whether an entry file exists under `key` (a stat, nothing read or verified).")
      .def(
          "try_compile_lock",
          [](LocalStore& s, const std::string& key) -> std::optional<CompileLock> {
            auto lock = unwrap(s.try_compile_lock(key));
            if (lock == nullptr) return std::nullopt;
            return CompileLock{std::move(lock)};
          },
          "key"_a,
          "The compile lock of `key` without waiting, or None when another holds it. Raises CacheIOError when "
          "the lock file cannot be created.")
      .def(
          "mark_used",
          [](LocalStore& s, const std::string& key) {
            nb::gil_scoped_release release;
            check(s.mark_used(key));
          },
          "key"_a,
          "Marks the entry used for eviction without reading it (best effort: nothing when it is absent). Raises "
          "CacheError for a malformed key.")
      .def(
          "get",
          [](LocalStore& s, const std::string& key) -> std::optional<LoadedEntry> {
            std::optional<Entry> e;
            {
              nb::gil_scoped_release release;
              e = unwrap(s.get(key));
            }
            if (!e) return std::nullopt;
            return loaded_entry(key, *e);
          },
          "key"_a,
          "The verified entry, or None on a miss. Raises CorruptEntryError (the file is quarantined), "
          "UntrustedEntryError (not signed by an accepted key: left in place), IncompatibleEntryError or "
          "CacheIOError.")
      .def(
          "peek",
          [](LocalStore& s, const std::string& key) -> std::optional<LoadedEntry> {
            std::optional<Entry> e;
            {
              nb::gil_scoped_release release;
              e = unwrap(s.peek(key));
            }
            if (!e) return std::nullopt;
            return loaded_entry(key, *e);
          },
          "key"_a, "Like get, without marking the entry used or quarantining a bad one (inspection).")
      .def(
          "put",
          [](LocalStore& s, const CacheKey& key, nb::bytes payload, nb::dict metadata, nb::bytes graph,
             nb::bytes kernels) {
            Entry e;
            e.key_digest = key.digest;
            e.manifest = key.manifest;
            e.component_values = key.component_values;
            e.metadata = to_value(metadata, 0);
            e.payload.assign(payload.c_str(), payload.size());
            e.graph.assign(graph.c_str(), graph.size());
            e.kernels.assign(kernels.c_str(), kernels.size());
            nb::gil_scoped_release release;
            check(s.put(e));
            return e.payload.size();
          },
          "key"_a, "payload"_a, "metadata"_a, "graph"_a = nb::bytes("", 0), "kernels"_a = nb::bytes("", 0),
          "Writes the entry atomically, with the serialized graph and the kernel bundle (encode_kernel_bundle) "
          "when given; returns the payload size.")
      .def(
          "read_entry_file",
          [](LocalStore& s, const std::string& key) -> std::optional<nb::bytes> {
            std::optional<std::string> bytes;
            {
              nb::gil_scoped_release release;
              bytes = unwrap(s.read_entry_file(key));
            }
            if (!bytes) return std::nullopt;
            return nb::bytes(bytes->data(), bytes->size());
          },
          "key"_a, "The entry file's bytes, unverified, or None when absent (for the remote tier and export).")
      .def(
          "put_encoded",
          [](LocalStore& s, nb::bytes data) {
            const std::string bytes(data.c_str(), data.size());
            nb::gil_scoped_release release;
            return unwrap(s.put_encoded(bytes));
          },
          "data"_a,
          "Stores encoded entry bytes after verifying them (checksum, key, signature when a key is set); returns "
          "the key. Raises CorruptEntryError, UntrustedEntryError, IncompatibleEntryError or CacheIOError.")
      .def(
          "put_encoded_entry",
          [](LocalStore& s, nb::bytes data, const std::string& key) {
            const std::string bytes(data.c_str(), data.size());
            Result<Entry> e = [&] {
              nb::gil_scoped_release release;
              return s.put_encoded_entry(bytes, key);
            }();
            return loaded_entry(key, unwrap(std::move(e)));
          },
          "data"_a, "key"_a,
          "put_encoded for a backfill: the bytes must be the entry of `key` (CorruptEntryError otherwise, nothing "
          "written); returns the verified entry as get(key) would, without reading it again.")
      .def(
          "remove", [](LocalStore& s, const std::string& key) { check(s.remove(key)); }, "key"_a)
      .def("list",
           [](LocalStore& s) {
             std::vector<std::tuple<std::string, uint64_t, int64_t>> rows;
             for (const auto& e : unwrap(s.list())) rows.emplace_back(e.key_hex, e.size, e.mtime_unix);
             return rows;
           })
      .def("clear", [](LocalStore& s) { check(s.clear()); })
      .def("set_max_size", &LocalStore::set_max_size, "bytes"_a, "Bound for LRU eviction after each put; 0 = none.")
      .def_prop_ro("max_size", &LocalStore::max_size)
      .def_prop_ro(
          "eviction",
          [](const LocalStore& s) { return s.eviction_policy() == EvictionPolicy::kLru ? "lru" : "saved-per-byte"; })
      .def_prop_ro(
          "signing_key_ids",
          [](const LocalStore& s) {
            std::vector<std::string> ids;
            for (const SigningKey& k : s.signing_keys().keys) ids.push_back(k.id);
            return ids;
          },
          "Ids of the keys in force (the first signs); [] when signing is off.")
      .def(
          "prune",
          [](LocalStore& s, uint64_t target_bytes, int64_t older_than_seconds) {
            return unwrap(s.prune(target_bytes, older_than_seconds));
          },
          "target_bytes"_a = 0, "older_than_seconds"_a = 0)
      .def(
          "keys_for_graph", [](LocalStore& s, const std::string& digest) { return unwrap(s.keys_for_graph(digest)); },
          "graph_digest"_a, "Keys of entries with this graph component digest, newest first.")
      .def(
          "add_counters", [](LocalStore& s, const Counters& delta) { check(s.add_counters(delta)); }, "delta"_a)
      .def("read_counters", [](LocalStore& s) { return unwrap(s.read_counters()); })
      .def(
          "size",
          [](LocalStore& s) {
            auto size = unwrap(s.size());
            return std::make_pair(size.bytes, size.entries);
          },
          "(bytes, entries) of the entry files, from the size ledger (re-synced by a scan when stale).")
      .def(
          "quarantined",
          [](LocalStore& s) {
            std::vector<std::string> names;
            for (const auto& f : unwrap(s.list_quarantine())) names.push_back(f.name);
            return names;
          },
          "File names in quarantine/, oldest first.");

  nb::class_<CompileLock>(m, "CompileLock")
      .def("release", &CompileLock::release, "Releases the lock (idempotent).")
      .def_prop_ro("held", [](const CompileLock& l) { return l.lock != nullptr; })
      .def(
          "__enter__", [](CompileLock& l) -> CompileLock& { return l; }, nb::rv_policy::reference)
      .def("__exit__", [](CompileLock& l, nb::args) { l.release(); });

  nb::class_<RemoteStore>(m, "RemoteStore")
      .def_static(
          "open",
          [](const std::string& urls, const std::string& key_prefix, int64_t ttl_seconds, int connect_timeout_ms,
             int operation_timeout_ms, uint64_t max_entry_bytes, int down_seconds) {
            RemoteOptions o;
            o.key_prefix = key_prefix;
            o.ttl_seconds = ttl_seconds;
            o.connect_timeout_ms = connect_timeout_ms;
            o.operation_timeout_ms = operation_timeout_ms;
            o.max_entry_bytes = max_entry_bytes;
            o.down_seconds = down_seconds;
            return unwrap(open_redis_store(urls, o));
          },
          "urls"_a, "key_prefix"_a = "aotcache:", "ttl_seconds"_a = 0, "connect_timeout_ms"_a = 500,
          "operation_timeout_ms"_a = 1000, "max_entry_bytes"_a = 128ULL << 20, "down_seconds"_a = 30,
          "A Redis remote tier over comma-separated redis:// or redis+unix:// URLs (connects lazily). Raises "
          "CacheError for a malformed URL or option.")
      .def(
          "get",
          [](RemoteStore& r, const std::string& key) -> std::optional<nb::bytes> {
            std::optional<std::string> bytes;
            {
              nb::gil_scoped_release release;
              bytes = unwrap(r.get(key));
            }
            if (!bytes) return std::nullopt;
            return nb::bytes(bytes->data(), bytes->size());
          },
          "key"_a, "Encoded entry bytes (unverified) or None on a miss. Raises RemoteUnavailableError.")
      .def(
          "put",
          [](RemoteStore& r, const std::string& key, nb::bytes data) {
            const std::string bytes(data.c_str(), data.size());
            nb::gil_scoped_release release;
            check(r.put(key, bytes));
          },
          "key"_a, "data"_a,
          "Stores encoded entry bytes. Raises RemoteUnavailableError, or CacheError for an entry above the limit.")
      .def(
          "try_lease",
          [](RemoteStore& r, const std::string& key, const std::string& token, int64_t lease_ms) {
            nb::gil_scoped_release release;
            return unwrap(r.try_lease(key, token, lease_ms));
          },
          "key"_a, "token"_a, "lease_ms"_a,
          "Takes the compile lease of `key` when free (True). Raises RemoteUnavailableError.")
      .def(
          "renew_lease",
          [](RemoteStore& r, const std::string& key, const std::string& token, int64_t lease_ms) {
            nb::gil_scoped_release release;
            return unwrap(r.renew_lease(key, token, lease_ms));
          },
          "key"_a, "token"_a, "lease_ms"_a, "Extends the lease if `token` still holds it; False when it was lost.")
      .def(
          "release_lease",
          [](RemoteStore& r, const std::string& key, const std::string& token) {
            nb::gil_scoped_release release;
            check(r.release_lease(key, token));
          },
          "key"_a, "token"_a, "Drops the lease if `token` still holds it.")
      .def(
          "probe",
          [](RemoteStore& r, const std::string& key) {
            RemoteStore::Probe p;
            {
              nb::gil_scoped_release release;
              p = unwrap(r.probe(key));
            }
            return std::make_pair(p.entry, p.leased);
          },
          "key"_a, "(entry stored, lease held) in one round trip.")
      .def("take_counters", &RemoteStore::take_counters, "remote.* counters since the last call, then zeroed.")
      .def_prop_ro("servers", &RemoteStore::servers);
}
