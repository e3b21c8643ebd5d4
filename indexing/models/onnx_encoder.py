"""A faster encoder with the same vectors: the installed model exported to ONNX, int8-quantised per channel
when that keeps the vectors (else kept in fp32), run by onnxruntime.

Why not sentence-transformers' own `backend="onnx"` / `"openvino"`: both go through Optimum, and on this
stack every Optimum release either downgrades transformers below what sentence-transformers 6 needs
(optimum-onnx 0.1) or pulls another torch build (optimum-intel). So the export is torch's own
`torch.onnx.export`, onnxruntime's transformer fusions and its `quantize_dynamic`, done once by `hybridrag
models install`, and this module runs the exported graph: the model folder's own tokenizer (`tokenizers`),
mean pooling and L2 normalisation, exactly what the sentence-transformers pipeline does (checked: `POOLING`
below).

An export is only kept if its vectors agree with the torch model's on a fixed English/Japanese sample
(cosine >= `MIN_COSINE`); the figure is written to `export.json` beside the model. Queries encoded here
search indexes built by the torch path (same model name, vectors within that tolerance).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from hybridrag.indexing.models.registry import (
    ModelSpec,
    ModelUnavailable,
    available_cores,
    core_share,
    default_models_dir,
)

ENCODER_NAME = "onnx"
MIN_COSINE = 0.99
OPSET = 17
# Bumped when the export changes; `hybridrag models install` redoes an export made by an older recipe.
# 2: int8 weights in 7 bits (`reduce_range`), because without AVX-512 VNNI onnxruntime sums u8 x s8 products
# in pairs into 16 bits, which 8-bit weights can saturate (benchmarks/README.md, "Constants").
# 3: the graph's attention, layer norms and GELUs fused into onnxruntime's transformer kernels before it is
# quantized (`fuse_transformer`): e5's passages 1.33x a second, a query's encoding 0.89x the time, the same
# agreement with torch (benchmarks/docs/scale.md, "Fused transformer kernels").
EXPORT_RECIPE = 3
# What `quantize_dynamic` turns into int8: the matrix products and the fused attention (QAttention). The word
# embeddings stay fp32: quantizing that table saves no arithmetic and moved passages slightly further from
# torch's (worst cosine on 60 SciFact passages 0.9948 -> 0.9943).
QUANTIZED_OPS = ("MatMul", "Attention")
#: Most one-text int8 calls run at once, one thread each (`OnnxEmbedder`, the name tagger's export).
MAX_WORKERS = 4
_Item = TypeVar("_Item")
_Out = TypeVar("_Out")
SAMPLE = (
    "Who founded Sony?",
    "Sakichi Toyoda invented the Type G automatic loom in 1924 in Nagoya, Japan.",
    "トヨタ自動車を設立したのは誰ですか",
    "豊田佐吉は自動織機を発明した。トヨタ自動車は一九三七年に設立された。",
    "Marie Curie discovered radium and polonium; she won two Nobel prizes.",
    "The Tokaido Shinkansen opened in 1964 between Tokyo and Shin-Osaka.",
    "湯川秀樹は中間子の存在を予言し、日本人として初めてノーベル賞を受賞した。",
    "Ada Lovelace wrote the first published algorithm for Babbage's Analytical Engine.",
)


def int8_workers(threads: int = 0) -> int:
    """How many one-text int8 calls run side by side: `threads` when given, else the process's cores, at
    most `MAX_WORKERS`. Such a call spends much of its time between the runtime's threads, so one thread a
    call and calls side by side beat one call at a time on every thread (benchmarks/docs/entities.md, "Cased
    names typed by the tagger and the typer together"); a call's arithmetic is the same either way."""
    return min(threads or available_cores(), MAX_WORKERS)


def cpu_session(model: Path, threads: int = 0) -> Any:
    """An onnxruntime session on the CPU, every graph optimisation on; `threads` > 0: that many intra-op
    threads (and one inter-op), 0: the process' share of the cores where it has one (`core_share`: a
    build's shard process), else the runtime's default."""
    import onnxruntime as ort

    threads = threads or core_share() or 0

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # No busy-waiting between runs: spinning intra-op threads burned the cores the retrievers and the
    # other requests needed (8 concurrent searches in process: 1.15-1.25x the searches/s without it,
    # one at a time unchanged).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


def side_by_side(run: Callable[[_Item], _Out], items: Sequence[_Item], workers: int, name: str) -> list[_Out]:
    """`run` of each item, in order, up to `workers` at once (threads named `name`)."""
    if workers <= 1 or len(items) <= 1:
        return [run(item) for item in items]
    with ThreadPoolExecutor(min(workers, len(items)), thread_name_prefix=name) as pool:
        return list(pool.map(run, items))


def onnx_dir(name: str) -> Path:
    """Where the export of a registered model lives (beside the converted models, never in site-packages)."""
    return default_models_dir() / "onnx" / name


def _pooling(model_path: Path) -> str:
    config = model_path / "1_Pooling" / "config.json"
    if not config.is_file():
        return "mean"
    data = json.loads(config.read_text("utf-8"))
    if data.get("pooling_mode"):
        return str(data["pooling_mode"])
    return "mean" if data.get("pooling_mode_mean_tokens", True) else "other"


def _max_length(model_path: Path) -> int:
    config = model_path / "sentence_bert_config.json"
    if config.is_file():
        return int(json.loads(config.read_text("utf-8")).get("max_seq_length", 512))
    return 512


def export_onnx(spec: ModelSpec, target: Path | None = None) -> dict[str, Any]:
    """Export `spec`'s model to `target` (int8, per-channel) and check it against torch; returns export.json."""
    source = spec.resolve()
    if _pooling(source) != "mean":
        raise ModelUnavailable(
            f"{spec.name}: only mean-pooled models are exported (found {_pooling(source)})"
        )
    target = target or onnx_dir(spec.name)
    staging = Path(
        tempfile.mkdtemp(prefix="onnx-export-", dir=target.parent if target.parent.exists() else None)
    )
    try:
        fp32, int8, fused = _export_files(source, staging)
        shutil.copy(source / "tokenizer.json", staging / "tokenizer.json")
        max_length = _max_length(source)
        precision, candidate, agreement, cosines = _choose_precision(spec, staging, int8, fp32, max_length)
        int8.unlink()
        fp32.unlink()
        info = {
            "model": spec.name,
            "source": str(source),
            "encoder": f"{ENCODER_NAME}-{precision}",
            "precision": precision,
            "opset": OPSET,
            "recipe": EXPORT_RECIPE,
            "quantization": "onnxruntime quantize_dynamic of the matrix products and attention, QInt8 weights "
            "(7-bit range), per channel"
            if precision == "int8"
            else f"none: int8 agreed with torch only to cosine {agreement['int8']}",
            "fused": fused,
            "pooling": "mean",
            "maxLength": max_length,
            "dim": candidate.dim,
            "minCosineVsTorch": agreement[precision],
            "meanCosineVsTorch": round(float(cosines.mean()), 5),
        }
        (staging / "export.json").write_text(json.dumps(info, indent=2) + "\n", "utf-8")
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.chmod(0o755)
        os.replace(staging, target)  # whole or not at all
        return info
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _export_files(source: Path, staging: Path) -> tuple[Path, Path, dict[str, int]]:
    """The model's fp32 ONNX graph (last hidden state out) with its transformer kernels fused, its int8
    quantization, in `staging`, and the fused kernels by name (`fuse_transformer`)."""
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    # Eager attention traces to the matrix products and softmax that onnxruntime's fusion recognises; the
    # default (scaled dot-product attention) traces to a form it leaves unfused. Same arithmetic.
    model = AutoModel.from_pretrained(str(source), local_files_only=True, attn_implementation="eager").eval()

    class LastHidden(torch.nn.Module):
        # transformers 5 wants keyword arguments (positional export fails on `use_cache`).
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    traced = staging / "model-traced.onnx"
    torch_to_onnx(LastHidden(model), traced, "last_hidden_state")
    fp32 = staging / "model-fp32.onnx"
    fused = fuse_transformer(traced, fp32, model.config.num_attention_heads, model.config.hidden_size)
    traced.unlink()
    int8 = staging / "model-int8.onnx"
    quantize_dynamic(
        str(fp32),
        str(int8),
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=True,
        op_types_to_quantize=list(QUANTIZED_OPS),
        # The fused kernels are outside onnx's shape inference: their outputs are float.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return fp32, int8, fused


def fuse_transformer(source: Path, target: Path, heads: int, hidden: int) -> dict[str, int]:
    """`source`, a BERT-style encoder's graph, written to `target` with onnxruntime's transformer fusions
    (attention, embedding and skip layer norms, bias + GELU: `onnxruntime.transformers.optimizer`, offline,
    no runtime optimisation baked in); returns how many of each fused kernel it holds (none fused is no
    error: the graph is the same function either way, only slower)."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(
        str(source), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=0, use_gpu=False
    )
    optimized.save_model_to_file(str(target))
    return {name: int(n) for name, n in optimized.get_fused_operator_statistics().items() if n}


def torch_to_onnx(module: Any, target: Path, output: str) -> None:
    """Export `module` (a torch module taking `input_ids` and `attention_mask`, batch x tokens, and returning
    one tensor named `output` with the same first two axes) to `target` at `OPSET`, both axes dynamic.

    The module is put in eval mode first: the exporter traces in eval mode and then sets the module back to
    the mode it found it in, recursively, which would leave a wrapped eval-mode model training (dropout on)."""
    import torch

    dummy = torch.ones(2, 8, dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    torch.onnx.export(
        module.eval(),
        (dummy, dummy),
        str(target),
        input_names=["input_ids", "attention_mask"],
        output_names=[output],
        dynamic_axes={"input_ids": axes, "attention_mask": axes, output: axes},
        opset_version=OPSET,
        dynamo=False,
    )


def _choose_precision(
    spec: ModelSpec, staging: Path, int8: Path, fp32: Path, max_length: int
) -> tuple[str, OnnxEmbedder, dict[str, float], np.ndarray]:
    """int8 when it keeps the vectors (cosine >= MIN_COSINE to torch on the sample), else fp32, which is
    exact; leaves the chosen one as staging/model.onnx. Raises when neither agrees."""
    from hybridrag.indexing.models.torch_encoder import SentenceTransformerEmbedder

    reference = SentenceTransformerEmbedder(spec)
    agreement: dict[str, float] = {}
    for precision, candidate_file in (("int8", int8), ("fp32", fp32)):
        shutil.copy(candidate_file, staging / "model.onnx")
        (staging / "export.json").write_text(json.dumps({"maxLength": max_length}), "utf-8")
        candidate = OnnxEmbedder(spec, staging)
        cosines = np.concatenate(
            [
                (reference.embed_queries(SAMPLE) * candidate.embed_queries(SAMPLE)).sum(axis=1),
                (reference.embed_passages(SAMPLE) * candidate.embed_passages(SAMPLE)).sum(axis=1),
            ]
        )
        agreement[precision] = round(float(cosines.min()), 5)
        if cosines.min() >= MIN_COSINE:
            return precision, candidate, agreement, cosines
    raise ModelUnavailable(
        f"{spec.name}: no ONNX export agrees with torch to cosine {MIN_COSINE} ({agreement}); not installed"
    )


def export_is_current(folder: Path) -> bool:
    """Whether `folder` holds an export made by this recipe (an older one is redone by `models install`)."""
    info_path = folder / "export.json"
    if not (folder / "model.onnx").is_file() or not info_path.is_file():
        return False
    try:
        return int(json.loads(info_path.read_text("utf-8")).get("recipe", 1)) >= EXPORT_RECIPE
    except (ValueError, TypeError):
        return False


class OnnxEmbedder:
    """Embeds with the ONNX export of a model: same name, dimension and prefixes as the torch path."""

    def __init__(
        self, spec: ModelSpec, folder: Path | None = None, threads: int = 0, batch_size: int = 32
    ) -> None:
        try:
            import onnxruntime  # noqa: F401 - a missing runtime is reported here, not at the first run
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelUnavailable("onnxruntime is not installed (pip install 'hybridrag[index]')") from exc
        folder = folder or onnx_dir(spec.name)
        if not (folder / "model.onnx").is_file():
            raise ModelUnavailable(
                f"no ONNX export of {spec.name} at {folder}: run `hybridrag models install {spec.name}`"
            )
        info_path = folder / "export.json"
        info = json.loads(info_path.read_text("utf-8")) if info_path.is_file() else {}
        self.name = spec.name
        self.path = folder
        self.encoder = f"{ENCODER_NAME}-{info.get('precision', 'int8')}"
        self._spec = spec
        # int8 graphs quantize each matrix product's input with one scale for the whole batch, so a text's
        # vector would depend on the texts it shares a call with: one text per call keeps every vector a
        # function of its text alone (and wastes nothing on padding; benchmarks/README.md, "Constants").
        self._batch_size = 1 if self.encoder.endswith("int8") else batch_size
        # One-text calls run on one thread each, a list's texts side by side (`int8_workers`): 1.2-1.3x the
        # passages a second of one call at a time on two threads, a query alone 4.3 -> 3.6-3.9 ms, the same
        # vectors.
        single = self._batch_size == 1
        self._workers = int8_workers(threads) if single else 1
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(int(info.get("maxLength", 512)))
        self._tokenizer.enable_padding()
        self._session = cpu_session(folder / "model.onnx", 1 if single else threads)
        # Batched (fp32) runs use every thread of the session: one at a time, as concurrent ones would only
        # fight over the same cores. Single-threaded int8 runs go side by side.
        self._lock = threading.Lock() if not single else None
        self.dim = int(info.get("dim") or self._run(["dimension probe"]).shape[1])

    def _run(self, items: Sequence[str]) -> np.ndarray:
        # Batches of similar length (longest first, as sentence-transformers does): a batch is padded to its
        # longest text, so mixing short and long passages wastes most of the work on padding.
        order = sorted(range(len(items)), key=lambda i: -len(items[i]))
        # Tokenized here, in the caller's thread; only the runs go side by side.
        batches = [
            self._tokenizer.encode_batch([items[i] for i in order[start : start + self._batch_size]])
            for start in range(0, len(items), self._batch_size)
        ]
        out = side_by_side(self._embed_batch, batches, self._workers, "encoder")
        if not out:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        vectors = np.empty((len(items), out[0].shape[1]), dtype=np.float32)
        vectors[order] = np.vstack(out)
        return vectors

    def _embed_batch(self, encodings: list[Any]) -> np.ndarray:
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        if self._lock is not None:
            with self._lock:
                hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        else:
            hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return np.asarray(pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None))

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._run([self._spec.passage_input(t) for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._run([self._spec.query_input(t) for t in texts])
