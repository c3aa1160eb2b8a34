"""Smart Turn v3.2 (ONNX, run with onnxruntime): is the utterance so far a finished turn?

The model (Daily's, BSD-2-Clause; provisioned from the ``pipecat-ai`` wheel by
scripts/provision_models.py) is a Whisper-tiny encoder with a classifier. It
ships quantized to int8; set-up makes a float32 copy of it
(:func:`float32_model`), which is what runs, because onnxruntime's int8
kernels answer differently by CPU (without VNNI, "Will we ever for|" read as
0.65 finished instead of 0.14). It reads the last 8 s of 16 kHz audio as
Whisper log-mel features and returns the probability that the person has
finished speaking.
Give it the utterance from its onset up to now, the trailing silence included,
as Pipecat does after its VAD's 0.2 s of silence.

Preprocessing, exactly as Pipecat 1.14 runs it
(``pipecat/audio/turn/smart_turn/local_smart_turn_v3.py``, ``_predict_endpoint``
and ``_whisper_features.py``), which is transformers'
``WhisperFeatureExtractor(chunk_length=8)`` with ``padding="max_length",
max_length=128000, truncation=True, do_normalize=True``:

* keep the last 8 s (128,000 samples); shorter audio is padded with zeros at
  the *start*, so the end of the speech is always at the end of the window;
* normalize the whole 8 s window, padding included, to zero mean and unit
  variance (float32, variance + 1e-7);
* 80 Slaney mel bands of a 400-point periodic-Hann STFT, hop 160, centred
  with reflect padding; power, mel floor 1e-10, log10; drop the last frame
  (800 frames remain); clamp to 8 below the maximum; ``(x + 4) / 4``.

The input is ``input_features`` float32 ``[batch, 80, 800]``; the output,
named ``logits``, is already the sigmoid's probability ``[batch, 1]``.

:func:`log_mel` computes the features with numpy only (no torch, no
transformers), following transformers' numpy path operation by operation
(float64 FFT, spectrum rounded to complex64, float64 mel projection): its
features equal that path's to within 1e-6. Against transformers' torch path
(float32, what it picks when torch is installed) they differ by up to ~4e-5.
In float32 the answer moves by less than 1e-3 for that. (The int8 model,
with quantized activations, is a step function of its input: on 88 cuts of
the shared recordings, transformers' own two paths gave answers within 1e-3
of each other on 77 % of them, and 0.28 apart at most.)
tests/integration/test_smart_turn.py checks both.

Cost (python -m voice.bench smart_turn, docs/bench/bench_turn.json): on a 2-core AMD EPYC
with AVX-512, a call takes 83 ms at p50 and 89 ms at p90 with one thread in
float32 (int8: 54 and 57 ms, the same run), whatever the audio's length (the
model always reads 8 s); the features are 3 ms of it. Two threads are no
faster here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime

from core.audio import ASR_RATE

WINDOW_S = 8
WINDOW = WINDOW_S * ASR_RATE  # samples the model reads: the last 8 s
N_FFT = 400
HOP = 160
N_MELS = 80
FRAMES = WINDOW // HOP  # 800


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear below 1 kHz, logarithmic above."""
    mel = 3.0 * hz / 200.0
    high = hz >= 1000.0
    mel[high] = 15.0 + np.log(hz[high] / 1000.0) * (27.0 / np.log(6.4))
    return mel


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    hz = 200.0 * mel / 3.0
    high = mel >= 15.0
    hz[high] = 1000.0 * np.exp(np.log(6.4) / 27.0 * (mel[high] - 15.0))
    return hz


def mel_filters() -> np.ndarray:
    """Whisper's filter bank, ``(201, 80)`` float64: triangles on Slaney's mel scale
    from 0 to 8 kHz, each normalized to unit area (transformers' ``mel_filter_bank``
    with ``norm="slaney", mel_scale="slaney"``)."""
    edges_mel = np.linspace(*_hz_to_mel(np.array([0.0, ASR_RATE / 2])), N_MELS + 2)
    edges = _mel_to_hz(edges_mel)
    bins = np.linspace(0, ASR_RATE // 2, N_FFT // 2 + 1)
    width = np.diff(edges)
    slopes = edges[None, :] - bins[:, None]
    rising = -slopes[:, :-2] / width[:-1]
    falling = slopes[:, 2:] / width[1:]
    filters = np.maximum(np.zeros(1), np.minimum(rising, falling))
    return filters * (2.0 / (edges[2 : N_MELS + 2] - edges[:N_MELS]))[None, :]


_MEL = mel_filters()
_HANN = np.hanning(N_FFT + 1)[:-1]  # periodic


def last_window(audio: np.ndarray) -> np.ndarray:
    """The last 8 s of ``audio`` as float32; shorter audio is padded with zeros at the start."""
    audio = np.asarray(audio, dtype=np.float32)
    if len(audio) >= WINDOW:
        return audio[-WINDOW:]
    return np.concatenate([np.zeros(WINDOW - len(audio), dtype=np.float32), audio])


def log_mel(audio: np.ndarray) -> np.ndarray:
    """Smart Turn's input features of 16 kHz float audio: ``(80, 800)`` float32 (see the module's docstring)."""
    if audio.ndim != 1 or len(audio) == 0:
        raise ValueError(f"Smart Turn reads mono audio, at least one sample; got shape {audio.shape}")
    x = last_window(audio)
    x = (x - x.mean()) / np.sqrt(x.var() + 1e-7)  # float32, the 8 s window with its padding
    padded = np.pad(x, N_FFT // 2, mode="reflect").astype(np.float64)
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP]  # (801, 400), a view
    spectrum = np.fft.rfft(frames * _HANN, axis=-1).astype(np.complex64)  # transformers keeps complex64
    power = np.abs(spectrum, dtype=np.float64) ** 2
    mel = np.maximum(1e-10, np.dot(_MEL.T, power.T))
    spec = np.log10(mel).astype(np.float32)[:, :-1]
    spec = np.maximum(spec, spec.max() - 8.0)
    return (spec + 4.0) / 4.0


class SmartTurn:
    """The end-of-turn model, loaded once and shared by every session.

    :meth:`probability` is a blocking call for a worker thread (an executor):
    onnxruntime runs concurrent calls on one session safely, and the features
    use no shared state, so calls from several threads need no lock.
    """

    def __init__(self, model: Path | onnxruntime.InferenceSession, threads: int = 1) -> None:
        """``threads``: onnxruntime's intra-op threads for one call (1, as Pipecat; see voice.bench smart_turn)."""
        self.session = model if isinstance(model, onnxruntime.InferenceSession) else load_session(model, threads)
        (inp,) = self.session.get_inputs()
        if inp.name != "input_features" or list(inp.shape[1:]) != [N_MELS, FRAMES]:
            raise ValueError(f"not a Smart Turn v3 model: its input is {inp.name} {inp.shape}")

    def probability(self, audio: np.ndarray) -> float:
        """The probability that the person has finished their turn, from 16 kHz mono float32
        ``audio``: the utterance so far with its trailing silence (only the last 8 s count).

        83 ms here (p50; 2 x86 cores, one thread, float32), whatever the length."""
        features = log_mel(audio)[None]
        (out,) = self.session.run(None, {"input_features": features})
        return float(np.asarray(out).reshape(-1)[0])


def float32_model(quantized: bytes) -> bytes:
    """The int8 Smart Turn model (ONNX bytes, as it ships) with float32 weights and activations.

    The shipped model is quantized QDQ style: int8 weights behind
    ``DequantizeLinear``, and a ``QuantizeLinear``/``DequantizeLinear`` pair on
    each activation, which onnxruntime fuses into int8 kernels. Those kernels
    answer differently by CPU: on x86 without VNNI, MLAS's u8s8 products
    saturate, and "Will we ever for|" reads as 0.65 finished instead of 0.14
    (an AVX2-only EPYC, and the same CPU emulated by QEMU). Here the weights
    are the int8 ones dequantized (``(q - zero_point) * scale``, the model's
    own arithmetic) and the activations stay float32, so every CPU gives the
    same answer to within float rounding.
    """
    import onnx  # provisioning only; the pipeline loads the result with onnxruntime
    from onnx import numpy_helper

    model = onnx.load_from_string(quantized)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    made_by = {out: node for node in graph.node for out in node.output}
    alias: dict[str, str] = {}  # a dequantized activation -> the float tensor it was quantized from
    folded: list[onnx.TensorProto] = []
    drop = []
    for node in graph.node:
        if node.op_type != "DequantizeLinear":
            continue
        source = made_by.get(node.input[0])
        if source is not None and source.op_type == "QuantizeLinear":
            alias[node.output[0]] = source.input[0]
        elif node.input[0] in inits:
            folded.append(numpy_helper.from_array(_dequantize(node, inits), node.output[0]))
        else:
            raise ValueError(f"not the Smart Turn model expected: {node.name} dequantizes a computed int8 tensor")
        drop.append(node)
    for node in graph.node:
        for i, name in enumerate(node.input):
            node.input[i] = alias.get(name, name)
    for node in drop:
        graph.node.remove(node)
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    for node in [n for n in graph.node if n.op_type == "QuantizeLinear"]:
        if node.output[0] in used:
            raise ValueError(f"not the Smart Turn model expected: {node.name} feeds more than a DequantizeLinear")
        graph.node.remove(node)
    used = {name for node in graph.node for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept + folded)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _dequantize(node, inits) -> np.ndarray:
    """A DequantizeLinear node of constant int8 weights, computed: ``(q - zero_point) * scale``."""
    from onnx import numpy_helper

    q = numpy_helper.to_array(inits[node.input[0]]).astype(np.float32)
    scale = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
    zero = numpy_helper.to_array(inits[node.input[2]]).astype(np.float32) if len(node.input) > 2 else np.zeros(1)
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    if scale.ndim == 1 and scale.size > 1:  # per channel, along ``axis``
        shape = [1] * q.ndim
        shape[axis] = scale.size
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    return ((q - zero) * scale).astype(np.float32)


def load_session(path: Path, threads: int = 1) -> onnxruntime.InferenceSession:
    opts = onnxruntime.SessionOptions()
    opts.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    opts.inter_op_num_threads = 1
    opts.intra_op_num_threads = threads
    opts.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
