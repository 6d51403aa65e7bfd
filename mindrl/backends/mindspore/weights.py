"""Hugging Face checkpoint I/O for the MindSpore model, framework-free on the file side.

Reads and writes ``safetensors`` directly (8-byte header length, JSON header, raw bytes), so
bfloat16 works with NumPy (which has no bf16 type: bf16 <-> fp32 by bit shifts, round to
nearest even on the way out). Reads single files and sharded ``model.safetensors.index.json``
directories; writes ``model.safetensors`` (plus an index when sharded) with
``{"format": "pt"}`` metadata, which transformers and vLLM load.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Dict, Iterable, Iterator, Tuple

import numpy as np

_NP = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
       "I32": np.int32, "U8": np.uint8, "I8": np.int8, "BOOL": np.bool_}
_ST = {np.dtype(v): k for k, v in _NP.items()}


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), round to nearest even (NaN kept NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """All tensors of one file, as float32 for floating types (bf16/fp16 widened)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        buf = data[lo:hi]
        if info["dtype"] == "BF16":
            arr = bf16_to_f32(np.frombuffer(buf, np.uint16))
        else:
            arr = np.frombuffer(buf, _NP[info["dtype"]])
            if arr.dtype in (np.float16, np.float64):
                arr = arr.astype(np.float32)
        out[name] = arr.reshape(info["shape"]).copy()
    return out


def write_safetensors(path: str, tensors: Dict[str, np.ndarray], dtype: str = "float32",
                      metadata: Dict[str, str] | None = None) -> None:
    """Write float tensors as ``dtype`` (float32 / bfloat16 / float16); others unchanged.
    Written to ``path + '.tmp'`` then renamed, so a crash never leaves a half file."""
    header, chunks, offset = {}, [], 0
    for name, arr in tensors.items():
        arr = np.asarray(arr)
        if arr.dtype.kind == "f":
            if dtype == "bfloat16":
                raw, st = f32_to_bf16(arr).tobytes(), "BF16"
            else:
                a = arr.astype(np.float16 if dtype == "float16" else np.float32)
                raw, st = np.ascontiguousarray(a).tobytes(), _ST[a.dtype]
        else:
            raw, st = np.ascontiguousarray(arr).tobytes(), _ST[arr.dtype]
        header[name] = {"dtype": st, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header["__metadata__"] = dict(metadata or {"format": "pt"})
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)


def iter_checkpoint(directory: str) -> Iterator[Tuple[str, np.ndarray]]:
    """(name, float32 array) for every tensor of an HF directory (single file or sharded)."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    elif os.path.exists(os.path.join(directory, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        raise FileNotFoundError(f"no model.safetensors or model.safetensors.index.json in "
                                f"{directory}")
    for fname in files:
        yield from read_safetensors(os.path.join(directory, fname)).items()


def write_checkpoint(directory: str, named: Iterable[Tuple[str, np.ndarray]],
                     dtype: str = "float32", max_shard_bytes: int = 4 << 30) -> None:
    """Write ``model.safetensors`` or, above ``max_shard_bytes``, numbered shards + index."""
    os.makedirs(directory, exist_ok=True)
    itemsize = 2 if dtype in ("bfloat16", "float16") else 4
    shards, cur, size, total = [], {}, 0, 0
    for name, arr in named:
        nbytes = int(np.asarray(arr).size) * itemsize
        if cur and size + nbytes > max_shard_bytes:
            shards.append(cur)
            cur, size = {}, 0
        cur[name] = arr
        size += nbytes
        total += nbytes
    shards.append(cur)
    if len(shards) == 1:
        write_safetensors(os.path.join(directory, "model.safetensors"), shards[0], dtype)
        return
    weight_map = {}
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(os.path.join(directory, fname), shard, dtype)
        weight_map.update({k: fname for k in shard})
    tmp = os.path.join(directory, "model.safetensors.index.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    os.replace(tmp, os.path.join(directory, "model.safetensors.index.json"))


def write_param(p, arr: np.ndarray) -> None:
    """Write ``arr`` (cast to the Parameter's dtype) into the Parameter's own storage
    (``ops.assign``). Graphs compiled before keep reading and writing that storage;
    ``Parameter.set_data`` would give the Parameter a new tensor they never see (measured on
    CPU, MindSpore 2.10: a compiled graph kept the old weights after ``set_data``)."""
    import mindspore as ms
    from mindspore import ops

    ops.assign(p, ms.Tensor(np.asarray(arr, np.float32), p.dtype))


def load_into(model, named: Iterable[Tuple[str, np.ndarray]], strict: bool = True) -> None:
    """Copy HF-named arrays into the model's parameters (cast to each parameter's dtype).

    A tied model ignores ``lm_head.weight``; a missing or mis-shaped parameter raises."""
    params = {p.name: p for p in model.get_parameters()}
    seen = set()
    for name, arr in named:
        if name not in params:
            if name == "lm_head.weight" and getattr(model, "tied", False):
                continue
            if strict and not name.endswith("rotary_emb.inv_freq"):
                raise KeyError(f"checkpoint tensor '{name}' has no parameter in the model")
            continue
        p = params[name]
        if tuple(p.shape) != tuple(arr.shape):
            raise ValueError(f"{name}: checkpoint shape {arr.shape} != model {p.shape}")
        write_param(p, arr)
        seen.add(name)
    missing = sorted(set(params) - seen)
    if strict and missing:
        raise KeyError(f"parameters missing from the checkpoint: {missing[:5]}"
                       f"{' ...' if len(missing) > 5 else ''}")


def named_arrays(model) -> Iterator[Tuple[str, np.ndarray]]:
    """(HF name, float32 numpy array) for every parameter of the model."""
    import mindspore as ms

    for p in model.get_parameters():
        t = p.value()
        if t.dtype != ms.float32:
            t = t.astype(ms.float32)
        yield p.name, t.asnumpy()


def read_config(directory: str) -> dict:
    with open(os.path.join(directory, "config.json")) as f:
        return json.load(f)
