"""Reading a downloaded checkpoint folder as untrusted input.

A folder from a model hub can be hostile: a pickle that runs code, a
config that asks for terabytes, a file name that points elsewhere. These
helpers read configs and tensors so that nothing runs, nothing is allocated
before the sizes are checked, and nothing outside the folder is read.
"""

import json
import math
import os

import numpy as np

from keras_transformer._validation import shown

# What a translation checkpoint may ask for; far above any published
# model (OPUS-MT: 6+6 layers, 512 wide, 58k-65k pieces; the largest
# Marian models: 12+12 layers, 1024 wide, 2048-4096 feed-forward).
LIMITS = {
    "vocab_size": 1_000_000,
    "d_model": 16_384,
    "layers": 128,
    "heads": 256,
    "ffn_dim": 65_536,
    "max_position_embeddings": 65_536,
}
# No single checkpoint file is read past this size.
MAX_FILE_BYTES = 32 * 2**30


def inside(folder, name, what):
    """The path of `name` in `folder`; refuses one that leaves it (an
    absolute path, `..`, or a symbolic link pointing out)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} must be a file name. Received: {name!r}")
    root = os.path.realpath(folder)
    path = os.path.realpath(os.path.join(root, name))
    if os.path.commonpath([root, path]) != root:
        raise ValueError(f"{what} {name!r} points outside the checkpoint folder {folder}")
    return path


def read_json(folder, name, required=True):
    """A JSON object from `folder/name`; None if absent and not required."""
    path = inside(folder, name, "file")
    if not os.path.exists(path):
        if required:
            raise FileNotFoundError(f"{folder} has no {name}")
        return None
    if os.path.getsize(path) > 256 * 2**20:
        raise ValueError(f"{path} is over 256 MiB: not a config")
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} must hold a JSON object, not {type(value).__name__}")
    return value


def check_number(source, name, value, most=float("inf"), kind=int, least=1):
    """`value` as a `kind` in [least, most], refused in one line naming
    the file and key. A whole float is taken as an int (JSON writers
    differ), never a bool, a string, NaN, infinity or an int past any
    float."""
    number = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # a 400-digit int
            pass
    if (number is None or not math.isfinite(number) or not least <= value <= most
            or (kind is int and not number.is_integer())):  # fmt: skip
        kind_name = "an integer" if kind is int else "a number"
        if least == -float("inf") and most == float("inf"):
            kind_name, bounds = f"a finite {kind_name.split()[-1]}", ""
        elif most == float("inf"):
            bounds = f" >= {least}"
        else:
            bounds = f" in [{least}, {most}]"
        raise ValueError(
            f"{source}: {name} must be {kind_name}{bounds}. Received: {shown(value, most=40)}"
        )
    return kind(value)


def read_tensors(folder):
    """The folder's tensors by name, as float32 NumPy arrays.

    `model.safetensors` is read with `safetensors` (no PyTorch needed);
    otherwise `pytorch_model.bin` with `torch.load(weights_only=True)`,
    which refuses any pickle that would run code. A checkpoint saved in
    shards (`model.safetensors.index.json`, `pytorch_model.bin.index.json`,
    as `save_pretrained(max_shard_size=...)` writes it) is read shard by
    shard; half-precision tensors (float16, bfloat16) are widened to
    float32.
    """
    for name, read in (
        ("model.safetensors", _read_safetensors),
        ("pytorch_model.bin", _read_torch),
    ):
        path = inside(folder, name, "file")
        if os.path.exists(path):
            return _float32(read(_checked_file(path)))
        index = inside(folder, f"{name}.index.json", "file")
        if os.path.exists(index):
            return _float32(_read_shards(folder, f"{name}.index.json", read))
    raise FileNotFoundError(
        f"{folder} has neither model.safetensors nor pytorch_model.bin (nor their "
        "sharded .index.json)"
    )


def _checked_file(path):
    if os.path.getsize(path) > MAX_FILE_BYTES:
        raise ValueError(f"{path} is over {MAX_FILE_BYTES // 2**30} GiB; refused")
    return path


def _read_shards(folder, index_name, read):
    """The tensors of the shards an index names, each shard inside the
    folder and each tensor in the shard the index gives, exactly once."""
    weight_map = read_json(folder, index_name).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{index_name} has no weight_map of tensor names to shard files")
    shards = {}
    for tensor, shard in weight_map.items():
        shards.setdefault(shard, set()).add(tensor)
    if len(shards) > 10_000:
        raise ValueError(f"{index_name} names {len(shards)} shards; refused")
    total = 0
    tensors = {}
    for shard, names in shards.items():
        path = inside(folder, shard, f"the shard of {index_name}")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{folder} has no {shard}, a shard {index_name} names")
        total += os.path.getsize(_checked_file(path))
        if total > MAX_FILE_BYTES:
            raise ValueError(f"the shards of {index_name} are over {MAX_FILE_BYTES // 2**30} GiB")
        for name, value in read(path).items():
            if name not in names:
                raise ValueError(f"{shard} holds {name!r}, which {index_name} does not put there")
            tensors[name] = value
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise ValueError(f"{index_name} names {missing[0]!r}, which its shard lacks")
    return tensors


def _read_safetensors(path):
    from keras_transformer._extras import require

    numpy_io = require("safetensors.numpy", "huggingface")
    # Registers bfloat16 and the float8 types with NumPy, so that a
    # half-precision checkpoint reads whichever backend is (not) loaded.
    import ml_dtypes  # noqa: F401

    try:
        return dict(numpy_io.load_file(path))
    except Exception as error:  # safetensors raises its own types
        raise ValueError(f"{path} is not a valid safetensors file: {error}") from None


def _read_torch(path):
    try:
        import torch
    except ImportError:
        raise ImportError(
            f"{path} is a PyTorch file: reading it needs PyTorch "
            "(pip install torch), or convert it to model.safetensors"
        ) from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise ValueError(
            f"{path} was refused: only plain tensors are read "
            f"(torch.load weights_only=True): {_torch_refusal(error)}"
        ) from None
    if not isinstance(state, dict):
        raise ValueError(f"{path} does not hold a dict of tensors")
    tensors = {}
    for name, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"{path}: {name!r} is not a tensor")
        tensors[name] = value.detach().to(torch.float32).numpy()
    return tensors


def _torch_refusal(error):
    """What in the file `torch.load(weights_only=True)` refused, without
    PyTorch's advice to load it again with `weights_only=False` (which runs
    whatever code a hostile file holds)."""
    text = str(error)
    _, found, detail = text.partition("WeightsUnpickler error:")
    lines = [line.strip() for line in (detail if found else text).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _float32(tensors):
    for name, value in tensors.items():
        if value.dtype != np.float32:
            if value.dtype.kind != "f" and value.dtype.name not in _HALF:
                raise ValueError(f"{name} has dtype {value.dtype}, not a floating type")
            tensors[name] = value.astype(np.float32)
    return tensors


# NumPy knows these (through ml_dtypes) as kinds of their own, not "f".
_HALF = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
