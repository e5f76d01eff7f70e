"""Compiling and loading: AOTAutograd + Inductor through `standalone_compile(aot=True)`, whose result serializes
to bytes, and the reverse. Torch's own AOTAutograd and FX graph caches are sandboxed while aotcache compiles, so
they neither serve nor keep aotcache's compiles: a hit is aotcache's own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from unittest import mock

import torch

from aotcache import torch_glue, wrapper_code, wrapper_loading
from aotcache.errors import Bypass
from aotcache.torch_glue import dispatch
from aotcache.torch_glue import dynamo as dynamo_glue
from aotcache.torch_glue import inductor as inductor_glue
from aotcache.torch_glue.aot_autograd import functorch_config
from aotcache.torch_glue.inductor import inductor_config
from aotcache.torch_glue.patching import Patches


@contextlib.contextmanager
def _sandboxed_torch_caches() -> Iterator[None]:
    """Torch needs its AOTAutograd cache switched on to make a result serializable; point it at an empty,
    throw-away directory so it can only miss, and remove what it wrote."""
    found = torch_glue.resolve("torch_cache_sandbox")
    if found is None:
        raise Bypass(
            "torch_internals",
            f"torch's caches cannot be sandboxed: {torch_glue.unavailable('torch_cache_sandbox')}",
        )
    FxGraphCache, AOTAutogradCache = found["FxGraphCache"], found["AOTAutogradCache"]
    tmp = tempfile.mkdtemp(prefix="aotcache-torch-")
    sandbox = (
        Patches("torch's caches sandboxed")
        .replace(FxGraphCache, "_get_tmp_dir", staticmethod(lambda: os.path.join(tmp, "fxgraph")))
        .replace(AOTAutogradCache, "_get_tmp_dir", classmethod(lambda cls: os.path.join(tmp, "aotautograd")))
    )
    try:
        with (
            _env_forced_switches_lifted(),
            sandbox.applied() as sandboxed,
            inductor_config.patch(fx_graph_cache=True, fx_graph_remote_cache=False),
            functorch_config.patch(enable_autograd_cache=True, enable_remote_autograd_cache=False),
        ):
            if not sandboxed:  # neither replaced (one WARNING): compiled as backend="inductor" would
                raise Bypass("torch_internals", "torch's caches cannot be sandboxed: their directories are not ours")
            yield
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _is_torch_callable(target: Any) -> bool:
    if isinstance(target, dispatch.HigherOrderOperator):
        return True
    module = getattr(target, "__module__", None) or ""
    return (module == "torch" or module.startswith("torch.")) and hasattr(target, "__name__")


@contextlib.contextmanager
def _torch_serialization_allowed(gm: torch.fx.GraphModule) -> Iterator[None]:
    """Lets torch serialize graphs whose soundness aotcache's own key and rules establish but torch's cache check
    refuses for lack of a key of its own: higher-order ops torch does not mark cacheable (cond, while_loop,
    autograd_function_apply: their bodies are subgraphs encoded into aotcache's key by content), private torch
    functions Dynamo puts in graphs (pinned by the torch version), and
    selective-checkpointing policies without a `cache_hash` (pinned by aotcache's digest of their code). Torch's
    cache is sandboxed during the compile, so the keys it computes here are never used to serve anything."""
    # Everything the rules allowed that torch's check may refuse: higher-order ops and torch-package functions
    # (private ones such as torch.amp.autocast_mode._enter_autocast included), by the name torch's check looks up.
    allowed = {
        f"{node.target.__module__}.{node.target.__name__}": torch.__version__
        for module in gm.modules()
        if isinstance(module, torch.fx.GraphModule)
        for node in module.graph.nodes
        if node.op == "call_function" and _is_torch_callable(node.target)
    }
    pin = torch_glue.resolve("checkpoint_policy_pin")  # None: torch's own rule (a policy needs a cache_hash)

    def pinned_by_aotcache(context_fn: Any) -> str | None:
        return pin["get_hash"](context_fn) or "pinned-by-aotcache-key"  # type: ignore[index]

    with contextlib.ExitStack() as stack:
        stack.enter_context(
            inductor_config.patch(
                unsafe_marked_cacheable_functions={**inductor_config.unsafe_marked_cacheable_functions, **allowed}
            )
        )
        if pin is not None:
            stack.enter_context(
                Patches("checkpoint policies pinned by aotcache's key")
                .replace(pin["module"], "_get_context_fn_cache_hash", pinned_by_aotcache)
                .applied()
            )
        yield


# Torch's cache switches that an environment variable can force (TORCHINDUCTOR_FX_GRAPH_CACHE=0,
# TORCHINDUCTOR_AUTOGRAD_CACHE=0, ...): a forced value wins over config.patch, which would leave every compile
# unserializable. Inside the sandbox torch's caches keep nothing, so the user's choice still holds outside it.
_CACHE_SWITCHES = (
    (inductor_config, "fx_graph_cache"),
    (inductor_config, "fx_graph_remote_cache"),
    (functorch_config, "enable_autograd_cache"),
    (functorch_config, "enable_remote_autograd_cache"),
)


@contextlib.contextmanager
def _env_forced_switches_lifted(switches: Sequence[tuple[Any, str]] = _CACHE_SWITCHES) -> Iterator[None]:
    try:
        from aotcache.torch_glue.aot_autograd import UNSET_SENTINEL as _UNSET_SENTINEL
    except (ImportError, AttributeError):  # the sandbox's check (torch_glue) turns the graph cache off
        yield
        return
    with contextlib.ExitStack() as stack:
        for module, name in switches:
            entry = module._config.get(name)
            if entry is not None and getattr(entry, "env_value_force", _UNSET_SENTINEL) is not _UNSET_SENTINEL:
                stack.enter_context(mock.patch.object(entry, "env_value_force", _UNSET_SENTINEL))
        yield


def inductor_options(mode: str | None, options: dict[str, Any] | None) -> dict[str, Any]:
    """The Inductor options of torch.compile(mode=..., options=...), as backend="inductor" would apply them (an
    unknown mode raises, as it does there)."""
    opts: dict[str, Any] = {}
    if mode is not None and mode != "default":
        opts.update(inductor_glue.list_mode_options(mode))
    opts.update(options or {})
    return opts


def compile_serializable(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: dict[str, Any],
    symbolic_inputs: Sequence[Any] | None = None,
) -> tuple[Callable[..., Any], bytes]:
    """Compiles `gm` and returns (callable, payload bytes).

    A static graph is specialized on `example_inputs`. A symbolic graph (`symbolic_inputs`: the placeholders' fake
    values) is compiled size-generic in Dynamo's own ShapeEnv, as backend="inductor" would: the guards the compile
    adds land where Dynamo reads them.

    Raises `Bypass` with the compiled callable attached as `.compiled` when compiling worked but torch could not
    make the result serializable (its own cacheability check refused the graph).
    """
    if torch.compiler.config.force_disable_caches:
        raise Bypass("torch_caches_disabled", "torch.compiler.config.force_disable_caches is set")
    if ddp_piece() and not options.get("keep_output_stride", inductor_config.keep_output_stride):
        raise Bypass(
            "ddp_output_strides",
            "a DDP piece compiled without keep_output_stride: the next piece needs the strides only an AOTAutograd "
            "compile in Dynamo's own context reports",
        )
    with _sandboxed_torch_caches(), _torch_serialization_allowed(gm), _ddp_piece_compiled_apart():
        # Static graphs: specialize on the example inputs in a fresh fake mode. The ambient tracing context would
        # re-fakify real inputs with new dynamic symbols (standalone_compile builds a new TracingContext without
        # Dynamo's tensor_to_context), compiling size-generic code and adding guards to Dynamo's shape env that make
        # its next recompile dynamic. Symbolic graphs pass Dynamo's own fake values, so no new symbol is made.
        # standalone_compile hands `options` to compile_fx as keyword arguments: Inductor configs go in config_patches.
        artifact = inductor_glue.standalone_compile(
            gm,
            list(symbolic_inputs if symbolic_inputs is not None else example_inputs),
            dynamic_shapes="from_tracing_context" if symbolic_inputs is not None else "from_example_inputs",
            options={"config_patches": dict(options)} if options else {},
            aot=True,
        )
        try:
            payload = artifact.serialize()
        except Exception as e:  # torch bypassed its own cache: the result exists but cannot be saved
            bypass = Bypass("not_serializable", f"torch could not serialize the compiled graph: {e!r}")
            bypass.compiled = artifact  # type: ignore[attr-defined]
            raise bypass from None
    return artifact, payload


def backend_fakes(example_inputs: Sequence[Any]) -> list[Any]:
    """The inputs as compile_fx fakifies them in Dynamo's backend context: each real tensor through the backend's
    fake mode with the symbolic context and source Dynamo traced it with. A float input gets back its symbolic
    `item()` that way (its memo lives on that fake only); Dynamo's placeholder fakes belong to the tracing fake mode,
    and re-fakified from them it would read as data-dependent."""
    ctx = dynamo_glue.TracingContext.get()
    mode = ctx.fake_mode
    out: list[Any] = []
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and not isinstance(x, dispatch.FakeTensor):
            context = ctx.tensor_to_context.get(x)
            source = context.tensor_source if context is not None else None
            out.append(mode.from_tensor(x, symbolic_context=context, source=source))
        else:
            out.append(x)
    return out


def ddp_piece() -> bool:
    """Whether this compile is one piece of a graph Dynamo's DDP optimizer split at bucket boundaries
    (`torch._dynamo.config.optimize_ddp`, on by default under DistributedDataParallel): the pieces come with fake
    inputs, under Dynamo's TracingContext marked `fakify_first_call`."""
    ctx = dynamo_glue.TracingContext.try_get()
    return bool(
        ctx is not None and getattr(ctx, "fakify_first_call", False) and getattr(ctx, "ddp_optimizer_ctx", None)
    )


@contextlib.contextmanager
def _ddp_piece_compiled_apart() -> Iterator[None]:
    """A DDP piece compiled here (in standalone_compile's own TracingContext) must not look to the DDP optimizer
    like an AOTAutograd compile in Dynamo's context: it then expects that compile's forward metadata on the context
    and fake outputs from a first call, which only such a compile provides. It reads that from AOTAutograd's compile
    counter; left unchanged, it takes the path of any other backend and gets the piece's outputs by running the piece
    on fake tensors, which are the compiled piece's outputs exactly while Inductor keeps eager's output strides
    (`keep_output_stride`, required above)."""
    if not ddp_piece():
        yield
        return
    from aotcache.torch_glue.dynamo import counters

    before = counters["aot_autograd"]["total"]
    try:
        yield
    finally:
        counters["aot_autograd"]["total"] = before


def load_serialized(
    payload: bytes, metadata: dict[str, Any] | None = None, light_load: bool = False
) -> Callable[..., Any]:
    """The callable of a stored payload: no AOTAutograd tracing, no Inductor lowering. With `light_load` and the
    entry's `wrapper_bindings` record in its `metadata`, without importing Inductor's compiler (wrapper_loading.py),
    and running the wrapper code its `wrapper_code` record holds instead of compiling the wrappers (wrapper_code.py)."""
    from aotcache.torch_glue.inductor import AOTCompiledArtifact

    record = metadata.get("wrapper_bindings") if light_load and isinstance(metadata, dict) else None
    stored = wrapper_code.decode(metadata.get("wrapper_code")) if record is not None else None
    with wrapper_loading.loading(wrapper_loading.Bindings.decode(record), stored):
        return AOTCompiledArtifact.deserialize(wrapper_loading.lazy_decompositions(payload))


def compile_plain(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: dict[str, Any]) -> Callable:
    """What backend="inductor" would do: the path of every bypass and fallback. Torch's own AOTAutograd cache stays
    off for it (aotcache is the cache of that stage): in torch 2.13 it loses the guard that specializes a symbolic
    float (a graph returning `c * 2` for a float argument `c` keeps returning the first value: the adversarial case
    dyn_python_float_returned). Inductor's FX graph cache is left as the user set it."""
    from aotcache.torch_glue.inductor import compile_fx

    with (
        _env_forced_switches_lifted([(functorch_config, "enable_autograd_cache")]),
        functorch_config.patch(enable_autograd_cache=False),
    ):
        return compile_fx(gm, list(example_inputs), config_patches=dict(options) or None)


def graph_state(gm: torch.fx.GraphModule) -> list[torch.Tensor]:
    """The parameters and buffers of `gm` in the order AOTAutograd lifts them into the compiled code's first
    arguments (the live tensors: an optimizer step updates them in place)."""
    return [
        *dict(gm.named_parameters(remove_duplicate=False)).values(),
        *dict(gm.named_buffers(remove_duplicate=False)).values(),
    ]


def returns_single(gm: torch.fx.GraphModule) -> bool:
    """Whether `gm` returns one value rather than a sequence (the compiled artifact always returns a sequence)."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    return not isinstance(output.args[0], (tuple, list))


def bind_to_graph(fn: Callable[..., Any], gm: torch.fx.GraphModule) -> Callable[..., Any]:
    """A loaded artifact is the inner compiled function; give it the calling convention of `gm` as compile_fx does:
    - it takes the graph module's parameters and buffers first, as AOTAutograd lifted them at compile time (graphs
      that read state through get_attr: compiled optimizer steps, graphs with nn modules in them): pass the live
      ones, so that updates land on them and updated values are used;
    - it returns a sequence even when the graph returns a single value (graphs not captured by Dynamo): unwrap."""
    state = graph_state(gm)
    single = returns_single(gm)
    if not state and not single:
        return fn

    def bound(*args: Any) -> Any:
        out = fn(*state, *args)
        return out[0] if single else out

    return bound
