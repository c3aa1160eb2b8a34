"""Our vLLM plugin (entry point ``vllm.general_plugins``), which vLLM runs in each of its
processes, the engine core and its workers included: it mends what stops vLLM's compile cache from
loading on the CPU.

There vLLM compiles with torch's own Inductor backend, whose compiled function torch wraps as a
``BundledAOTAutogradSerializableCallable``; vLLM 0.32 loads a cached one and then calls
``finalize_loading`` on it, which only its own backend's functions have. The load fails
("'function' object has no attribute 'finalize_loading'") and every start compiled again: 83-131 s
on 2 cores. Torch's function is whole when loaded, so there is nothing to finalize.
"""

from __future__ import annotations

from typing import Any


def register() -> None:
    """Give torch's loaded Inductor functions the ``finalize_loading`` vLLM asks of them."""
    try:
        from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable
    except ImportError:  # another torch: nothing known to mend
        return
    if not hasattr(BundledAOTAutogradSerializableCallable, "finalize_loading"):
        BundledAOTAutogradSerializableCallable.finalize_loading = _loaded_whole  # type: ignore[attr-defined]


def _loaded_whole(self: Any, vllm_config: Any) -> None:
    """Nothing to do: torch's deserialized function is ready to call."""
