"""torch_glue.patching: pass-throughs go into torch all together or not at all (issue 42: the light load once left
two of its three replacements installed when the third failed)."""

from __future__ import annotations

import logging
import types

from aotcache import wrapper_loading
from aotcache.torch_glue.patching import Patches


class _Refusing(type):
    """A class that refuses a new `__call__` (as a torch class with slots or a C type would refuse an attribute)."""

    def __setattr__(cls, name, value):
        if name == "__call__":
            raise TypeError(f"cannot set {name!r}")
        super().__setattr__(name, value)


def test_a_failing_replacement_puts_back_the_ones_before_it(caplog):
    module = types.SimpleNamespace(f=lambda: "f", g=lambda: "g")
    original_f, original_g = module.f, module.g

    class Target(metaclass=_Refusing):
        def __call__(self):
            return "own"

    patches = (
        Patches("probe")
        .replace(module, "f", lambda: "F")
        .replace(module, "g", lambda: "G")
        .replace(Target, "__call__", lambda self: "new")
    )
    with caplog.at_level(logging.WARNING, logger="aotcache"):
        assert patches.install() is False
    assert (module.f, module.g) == (original_f, original_g) and Target()() == "own"
    assert not patches.installed
    assert [r for r in caplog.records if "probe: torch could not be patched" in r.getMessage()]


def test_install_then_uninstall_restores_class_attributes_as_they_were():
    class Target:
        @staticmethod
        def s():
            return "s"

        @classmethod
        def c(cls):
            return "c"

    own_s, own_c = Target.__dict__["s"], Target.__dict__["c"]
    patches = Patches("probe").replace(Target, "s", staticmethod(lambda: "S")).replace(Target, "c", lambda: "C")
    assert patches.install() and patches.install()  # once; a second call changes nothing
    assert Target.s() == "S" and Target.c() == "C"
    patches.uninstall()
    assert Target.__dict__["s"] is own_s and Target.__dict__["c"] is own_c
    assert Target.s() == "s" and Target.c() == "c"


def test_the_light_load_is_all_or_nothing(monkeypatch):
    """A torch whose CompiledFxGraph refuses the third pass-through: the light load is off and the first two of torch's
    functions are torch's own (before, they stayed replaced while the load took torch's path)."""
    from aotcache.torch_glue.inductor import codecache, output_code

    reload_before = codecache._reload_python_module
    post_before = codecache.FxGraphCache.__dict__["cache_hit_post_compile"]

    class CompiledFxGraph(
        output_code.CompiledFxGraph, metaclass=type("M", (_Refusing, type(output_code.CompiledFxGraph)), {})
    ):
        pass

    monkeypatch.setattr(output_code, "CompiledFxGraph", CompiledFxGraph)
    monkeypatch.setattr(wrapper_loading, "_installed", None)
    monkeypatch.setattr(codecache, "_reload_python_module", reload_before)  # restored after, whatever happens
    monkeypatch.setattr(codecache.FxGraphCache, "cache_hit_post_compile", post_before)
    assert wrapper_loading._install() is False
    assert codecache._reload_python_module is reload_before
    assert codecache.FxGraphCache.__dict__["cache_hit_post_compile"] is post_before
