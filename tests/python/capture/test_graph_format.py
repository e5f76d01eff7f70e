"""The serialized graph in entries: bindings, store round trip, `aotcache show`, and the backend storing it."""

from __future__ import annotations

import json

import pytest

from aotcache import _core
from conftest import cli


def _graph() -> tuple[_core.Graph, list]:
    g = _core.Graph()
    g.add_node("x", "placeholder", "none", "x", (), {})
    g.add_node("n", "placeholder", "none", "n", (), {})
    g.add_node("add", "call_function", "aten_op", "aten::add.Tensor", (_core.NodeRef(0), 2), {"alpha": 1})
    g.add_node("output", "output", "none", "output", ((_core.NodeRef(2),),), {})
    return g, [_core.TensorMeta("float32", "cpu", [2, 3], [3, 1], requires_grad=True), 5]


def _key(g: _core.Graph, inputs: list) -> _core.CacheKey:
    return _core.compute_key(g, inputs, {"grad_enabled": True}, {}, {}, {})


def test_entry_carries_the_graph_and_show_prints_it(tmp_path):
    cache_dir = tmp_path / "cache"
    store = _core.LocalStore.open(str(cache_dir))
    g, inputs = _graph()
    data = _core.serialize_graph(g, inputs)
    assert data[:4] == b"AOTG"
    key = _key(g, inputs)
    store.put(key, b"payload", {"producer": "test"}, graph=data)
    assert store.get(key.hex).graph == data

    text = cli(cache_dir, "show", key.hex)
    assert "graph          format v2.0, " in text
    assert "matches the manifest" in text
    assert "  %add = call_function[aten::add.Tensor](%x, 2, alpha=1)\n" in text
    assert "  %x = placeholder[x]() : float32[2, 3] cpu requires_grad\n" in text
    shown = json.loads(cli(cache_dir, "show", key.hex, "--json"))
    assert shown["graph_matches_manifest"] is True
    assert [n["name"] for n in shown["graph"]["nodes"]] == ["x", "n", "add", "output"]
    assert shown["graph"]["nodes"][2]["args"] == [{"ref": 0}, 2]
    assert shown["graph"]["inputs"][1] == {"scalar": 5}


def test_show_tells_a_missing_or_foreign_graph(tmp_path):
    cache_dir = tmp_path / "cache"
    store = _core.LocalStore.open(str(cache_dir))
    g, inputs = _graph()
    key = _key(g, inputs)
    store.put(key, b"payload", {})  # an entry written without its graph, as before the graph section
    assert store.get(key.hex).graph == b""
    assert "not stored" in cli(cache_dir, "show", key.hex)
    assert json.loads(cli(cache_dir, "show", key.hex, "--json"))["graph"] is None
    # A graph that is not the one the key was computed over is shown, with the mismatch said.
    other = _core.Graph()
    other.add_node("y", "placeholder", "none", "y", (), {})
    store.put(key, b"payload", {}, graph=_core.serialize_graph(other, inputs))
    assert "does not match the manifest" in cli(cache_dir, "show", key.hex)
    assert json.loads(cli(cache_dir, "show", key.hex, "--json"))["graph_matches_manifest"] is False


def test_readable_forms_and_errors():
    g, inputs = _graph()
    data = _core.serialize_graph(g, inputs)
    assert "%output = output[output]((%add,))" in _core.graph_to_text(data)
    assert json.loads(_core.graph_to_json(data))["nodes"][3]["op"] == "output"
    with pytest.raises(_core.CorruptEntryError):
        _core.graph_to_text(data[:-1])
    newer = data[:4] + b"\x03\x00" + data[6:]
    with pytest.raises(_core.IncompatibleEntryError, match="newer than this reader"):
        _core.graph_to_text(newer)
    digest = bytes(32)  # constants must hash to their digest
    with pytest.raises(_core.CacheError, match="do not hash"):
        _core.serialize_graph(g, inputs, {digest: b"x"})


def test_backend_stores_the_captured_graph(run_fresh, cache_dir):
    run_fresh("mlp")
    keys = [e["key"] for e in json.loads(cli(cache_dir, "ls", "--json")) if e["kind"] == "graph"]  # not frames
    assert keys
    for key in keys:
        shown = json.loads(cli(cache_dir, "show", key, "--json"))
        assert shown["graph_matches_manifest"] is True, shown.get("graph_problem")
        ops = {n["op"] for n in shown["graph"]["nodes"]}
        assert {"placeholder", "call_function", "output"} <= ops
