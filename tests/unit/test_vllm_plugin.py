"""Our vLLM plugin: registered where vLLM looks for it, and it mends the compile cache's load."""

from importlib.metadata import entry_points

from llm import vllm_plugin


def test_vllm_finds_the_plugin_in_its_general_group():
    (ep,) = [e for e in entry_points(group="vllm.general_plugins") if e.name == "voice_compile_cache"]
    assert ep.load() is vllm_plugin.register


def test_a_loaded_inductor_function_can_be_finalized_as_vllm_asks():
    from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable

    vllm_plugin.register()
    vllm_plugin.register()  # vLLM runs it in each process; twice is harmless
    assert BundledAOTAutogradSerializableCallable.finalize_loading(object(), None) is None
