"""Reading a downloaded checkpoint folder as untrusted input.

A folder from a model hub can be hostile: a pickle that runs code, a
config that asks for terabytes, a file name that points elsewhere. These
helpers read configs and tensors so that nothing runs, nothing is allocated
before the sizes are checked, and nothing outside the folder is read.
"""

import json
import os

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


def check_size(name, value, limit):
    """`value` as a positive int no larger than `limit`."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"The config's {name} must be a positive int. Received: {value!r}")
    if value > limit:
        raise ValueError(f"The config's {name}={value} is over the limit of {limit}; refused")
    return value


def read_tensors(folder):
    """The folder's tensors by name, as NumPy arrays.

    `model.safetensors` is read with `safetensors` (no PyTorch needed);
    otherwise `pytorch_model.bin` with `torch.load(weights_only=True)`,
    which refuses any pickle that would run code.
    """
    safetensors_path = inside(folder, "model.safetensors", "file")
    torch_path = inside(folder, "pytorch_model.bin", "file")
    for path in (safetensors_path, torch_path):
        if os.path.exists(path) and os.path.getsize(path) > MAX_FILE_BYTES:
            raise ValueError(f"{path} is over {MAX_FILE_BYTES // 2**30} GiB; refused")
    if os.path.exists(safetensors_path):
        from keras_transformer._extras import require

        numpy_io = require("safetensors.numpy", "huggingface")
        try:
            return dict(numpy_io.load_file(safetensors_path))
        except Exception as error:  # safetensors raises its own types
            raise ValueError(
                f"{safetensors_path} is not a valid safetensors file: {error}"
            ) from None
    if os.path.exists(torch_path):
        try:
            import torch
        except ImportError:
            raise ImportError(
                f"{torch_path} is a PyTorch file: reading it needs PyTorch "
                "(pip install torch), or convert it to model.safetensors"
            ) from None
        try:
            state = torch.load(torch_path, map_location="cpu", weights_only=True)
        except Exception as error:
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise ValueError(
                f"{torch_path} was refused: only plain tensors are read "
                f"(torch.load weights_only=True): {message}"
            ) from None
        if not isinstance(state, dict):
            raise ValueError(f"{torch_path} does not hold a dict of tensors")
        tensors = {}
        for name, value in state.items():
            if not isinstance(value, torch.Tensor):
                raise ValueError(f"{torch_path}: {name!r} is not a tensor")
            tensors[name] = value.detach().to(torch.float32).numpy()
        return tensors
    raise FileNotFoundError(f"{folder} has neither model.safetensors nor pytorch_model.bin")
