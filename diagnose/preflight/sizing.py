"""How many GPUs a model needs, by arithmetic: the tensor-parallel size from the weights, the
GPUs' memory, the memory fraction, one full-length sequence of KV cache and the visible GPUs,
restricted to sizes that divide the attention heads (and KV heads).

Pure: numbers in, a :class:`TpChoice` out (with the sums it was computed from, for the report).

>>> shape = ModelShape(heads=64, kv_heads=8, layers=80, head_dim=128, kv_layers=80)
>>> shape.tp_problems(6)
['64 attention heads', '8 KV heads']
>>> shape.tp_problems(16)  # more ranks than KV heads: each KV head is replicated
[]
>>> choice = choose_tp(shape, current=2, pp=1, weights_gb=141.1, gpu_total_gb=80.0,
...                    fraction=0.85, context=8192, visible=[0, 1], gpu_count=4)
>>> choice.tp, choice.cuda_visible_devices
(4, '0,1,2,3')
>>> print(choice.numbers.replace(", ", ",\\n"))
141.1 GB of weights / TP 4 = 35.3 GB per GPU,
+ 0.7 GB of KV cache for one 8192-token sequence,
within 80.0 GB x 0.85 = 68.0 GB per GPU
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KV_BYTES = 2
"""Bytes per KV-cache element (bf16/fp16; an fp8 KV cache halves it)."""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True)
class ModelShape:
    """What tensor parallelism has to split, from ``config.json``."""

    heads: int | None = None
    kv_heads: int | None = None
    layers: int | None = None
    head_dim: int | None = None
    latent_kv: int | None = None
    """MLA (DeepSeek): the compressed KV width per layer, replicated on every rank."""
    kv_layers: int | None = None
    """Layers that keep a KV cache (a hybrid model's full-attention layers; None: unknown)."""

    def tp_problems(self, tp: int) -> list[str]:
        """What ``tp`` does not divide (vLLM and SGLang both refuse to start then)."""
        out: list[str] = []
        if self.heads and self.heads % tp:
            out.append(f"{self.heads} attention heads")
        kv = self.kv_heads
        if kv and self.latent_kv is None and kv % tp and tp % kv:
            out.append(f"{kv} KV heads")
        return out

    def kv_gb_per_gpu(self, tp: int, tokens: int, element_bytes: int = KV_BYTES) -> float | None:
        """KV cache for ``tokens`` tokens on one rank (None: the config does not say)."""
        layers = self.kv_layers
        if not layers:
            return None
        if self.latent_kv is not None:
            return layers * self.latent_kv * element_bytes * tokens / 1e9
        if not (self.kv_heads and self.head_dim):
            return None
        heads_here = max(1, self.kv_heads // tp) if tp <= self.kv_heads else 1
        return 2 * layers * heads_here * self.head_dim * element_bytes * tokens / 1e9


def model_shape(config: Mapping[str, Any], hybrid: bool = False) -> ModelShape:
    """The shape of a ``config.json`` (its text part for multimodal models). A ``hybrid``
    model's KV cache is counted on its attention layers (``layer_types``) or not at all."""
    parts: list[Mapping[str, Any]] = [config]
    for key in ("text_config", "llm_config", "language_config"):
        nested = config.get(key)
        if isinstance(nested, Mapping):
            parts.insert(0, nested)

    def first(*keys: str) -> int | None:
        for part in parts:
            for key in keys:
                found = _int(part.get(key))
                if found is not None:
                    return found
        return None

    heads = first("num_attention_heads", "n_head", "num_heads")
    kv_heads = first("num_key_value_heads", "n_head_kv", "num_kv_heads") or heads
    hidden = first("hidden_size", "n_embd")
    head_dim = first("head_dim") or (hidden // heads if hidden and heads else None)
    rank = first("kv_lora_rank")
    latent = rank + (first("qk_rope_head_dim") or 0) if rank else None
    layers = first("num_hidden_layers", "n_layer", "num_layers")
    kv_layers = None if hybrid else layers
    for part in parts:
        types = part.get("layer_types")
        if isinstance(types, list) and types:
            kv_layers = sum(1 for t in types if str(t) in ("full_attention", "attention"))
            break
    return ModelShape(heads, kv_heads, layers, head_dim, latent, kv_layers)


@dataclass(frozen=True)
class TpChoice:
    """A tensor-parallel size that works, with its sums; or why none does (``missing``)."""

    tp: int | None
    numbers: str = ""
    cuda_visible_devices: str | None = None
    """The GPUs to list when the visible ones are too few and the host has more."""
    missing: str = ""


def _fits(
    shape: ModelShape,
    tp: int,
    pp: int,
    weights_gb: float,
    budget_gb: float,
    context: int,
) -> tuple[bool, float, float | None]:
    per_gpu = weights_gb / (tp * pp)
    kv = shape.kv_gb_per_gpu(tp, context)
    kv_here = kv / pp if kv is not None else 0.0
    return per_gpu + kv_here <= budget_gb, per_gpu, (kv_here if kv is not None else None)


def choose_tp(
    shape: ModelShape,
    current: int,
    pp: int,
    weights_gb: float | None,
    gpu_total_gb: float | None,
    fraction: float,
    context: int | None,
    visible: Sequence[int] | None,
    gpu_count: int | None,
) -> TpChoice:
    """The tensor-parallel size to use: it divides the heads, its share of the weights and one
    full-length sequence's KV cache fit in each GPU's budget (memory x fraction), and the host
    has the GPUs. The largest such size up to ``current`` (no more GPUs than now), else the
    smallest above it; with no memory figures, the nearest size that divides the heads."""
    limit = gpu_count if gpu_count else (len(visible) if visible else max(current, 8))
    sizes = [t for t in range(1, max(limit // max(pp, 1), 1) + 1) if not shape.tp_problems(t)]
    memory = weights_gb is not None and gpu_total_gb is not None
    tokens = context or 4096
    budget = (gpu_total_gb or 0.0) * fraction
    fitting: list[tuple[int, float, float | None]] = []
    for tp in sizes:
        if not memory:
            fitting.append((tp, 0.0, None))
            continue
        fits, per_gpu, kv = _fits(shape, tp, pp, weights_gb or 0.0, budget, tokens)
        if fits:
            fitting.append((tp, per_gpu, kv))
    if not fitting:
        missing = _missing(weights_gb, gpu_total_gb, fraction, limit)
        return TpChoice(None, missing=missing)
    below = [f for f in fitting if f[0] <= current]
    tp, per_gpu, kv = below[-1] if below else fitting[0]
    numbers = ""
    if memory:
        numbers = (
            f"{weights_gb} GB of weights / TP {tp}"
            + (f" / PP {pp}" if pp > 1 else "")
            + f" = {per_gpu:.1f} GB per GPU"
        )
        if kv is not None:
            numbers += f", + {kv:.1f} GB of KV cache for one {tokens}-token sequence"
        numbers += f", within {gpu_total_gb} GB x {fraction:g} = {budget:.1f} GB per GPU"
    gpus = tp * pp
    widened: str | None = None
    if visible is not None and gpus > len(visible):
        if gpu_count is None or gpus > gpu_count:
            return TpChoice(
                tp,
                numbers,
                missing=f"TP {tp} needs {gpus} GPUs; {len(visible)} are visible and the host's "
                "other GPUs are not known (run where nvidia-smi works)",
            )
        extra = [i for i in range(gpu_count) if i not in visible]
        widened = ",".join(str(i) for i in [*visible, *extra][:gpus])
    return TpChoice(tp, numbers, widened)


def _missing(
    weights_gb: float | None,
    gpu_total_gb: float | None,
    fraction: float,
    limit: int,
) -> str:
    if weights_gb is None or gpu_total_gb is None:
        return f"no tensor-parallel size up to {limit} divides the model's heads"
    budget = gpu_total_gb * fraction
    need = weights_gb / budget
    return (
        f"{weights_gb} GB of weights need at least {need:.1f} GPUs of {gpu_total_gb} GB at "
        f"fraction {fraction:g} ({budget:.1f} GB each) before any KV cache; the host has "
        f"{limit} with a size that divides the heads: use a quantized checkpoint (FP8 halves "
        "the weights) or GPUs with more memory"
    )


_VLLM_KEYS: tuple[str, ...] = ("max_position_embeddings", "n_positions", "max_seq_len")
_VLLM_KEYS += ("seq_length", "max_sequence_length", "max_seq_length", "seq_len")
_SGLANG_KEYS: tuple[str, ...] = ("max_sequence_length", "seq_length", "max_seq_len")
_SGLANG_KEYS += ("model_max_length", "max_position_embeddings")


@dataclass(frozen=True)
class ContextLimit:
    """The longest context the engine derives from ``config.json``, and how."""

    tokens: int
    how: str


def context_limit(config: Mapping[str, Any], engine: str) -> ContextLimit | None:
    """The engine's derived maximum context: the config's position limit, times the RoPE
    scaling factor where the engine applies it (vLLM: every type but ``llama3``, ``longrope``
    and ``su``, YaRN from ``original_max_position_embeddings``; SGLang: only a factor without
    ``original_max_position_embeddings`` and not ``llama3``).

    >>> yarn = {"max_position_embeddings": 32768, "rope_scaling": {"rope_type": "yarn",
    ...         "factor": 4.0, "original_max_position_embeddings": 32768}}
    >>> context_limit(yarn, "vllm").tokens, context_limit(yarn, "sglang").tokens
    (131072, 32768)
    """
    part: Mapping[str, Any] = config
    for key in ("text_config", "llm_config", "language_config"):
        nested = config.get(key)
        if isinstance(nested, Mapping) and any(k in nested for k in _VLLM_KEYS + _SGLANG_KEYS):
            part = nested
            break
    keys = _SGLANG_KEYS if engine == "sglang" else _VLLM_KEYS
    found = [(k, _int(part.get(k))) for k in keys]
    present = [(k, v) for k, v in found if v is not None]
    if not present:
        return None
    key, base = present[0] if engine == "sglang" else min(present, key=lambda kv: kv[1] or 0)
    assert base is not None
    how = f"{key}={base}"
    scaling = part.get("rope_scaling") or config.get("rope_scaling")
    if not isinstance(scaling, Mapping):
        return ContextLimit(base, how)
    kind = str(scaling.get("rope_type") or scaling.get("type") or "")
    factor = scaling.get("factor", 1)
    if not isinstance(factor, (int, float)) or factor <= 0 or kind in ("llama3", "longrope", "su"):
        return ContextLimit(base, how)
    original = _int(scaling.get("original_max_position_embeddings"))
    if engine == "sglang":
        if original is not None:
            return ContextLimit(base, how + f" (rope_scaling {kind} x{factor:g} is not applied)")
        return ContextLimit(int(base * factor), how + f" x rope_scaling {kind} factor {factor:g}")
    if kind == "yarn" and original is not None:
        key, base = "original_max_position_embeddings", original
    if factor == 1:
        return ContextLimit(base, how)
    return ContextLimit(int(base * factor), f"{key}={base} x rope_scaling {kind} factor {factor:g}")
