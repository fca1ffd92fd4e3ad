"""Reading a `.safetensors` file with numpy alone: the header first (every tensor's name, dtype and shape), then
the tensors.

The format (https://github.com/huggingface/safetensors): 8 bytes, the little-endian length N of a JSON header; N
bytes of JSON mapping each tensor's name to `{"dtype", "shape", "data_offsets": [begin, end]}` (offsets into the
bytes after the header) and an optional `__metadata__`; then the tensors' bytes, little-endian, C order. Reading the
header alone gives every shape before anything is allocated, so a configuration can be checked against the tensors
first. bfloat16 tensors come back as `ml_dtypes.bfloat16` arrays (numpy has no bfloat16 of its own).
"""

import json
import math
import pathlib

import ml_dtypes
import numpy as np

DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
_MAX_HEADER_BYTES = 100 * 2**20  # the reference implementation refuses larger headers too


def read_header(path):
    """{name: (numpy dtype, shape tuple, (begin, end) byte offsets)} for every tensor of a .safetensors file, and the
    offset of the first tensor byte. Errors name the file and what is wrong with it.

    Example:
    ```python
    from safetensors.numpy import save_file
    from kzoo.checkpoints.safetensors_file import read_header

    save_file({"embeddings": np.zeros((30522, 768), np.float32)}, "model.safetensors")
    tensors, data_start = read_header("model.safetensors")  # nothing of the 94 MB is read or allocated
    dtype, shape, (begin, end) = tensors["embeddings"]
    assert (dtype, shape, end - begin) == (np.float32, (30522, 768), 30522 * 768 * 4)
    ```
    """
    path = pathlib.Path(path)
    size = path.stat().st_size
    with open(path, "rb") as file:
        prefix = file.read(8)
        if len(prefix) < 8:
            raise ValueError(f"{path} is {size} bytes long: too short for a safetensors file (8-byte header length).")
        header_bytes = int.from_bytes(prefix, "little")
        if header_bytes > min(_MAX_HEADER_BYTES, size - 8):
            raise ValueError(f"{path} announces a {header_bytes}-byte header in a {size}-byte file: it is not a "
                             "safetensors file, or it is truncated.")
        try:
            header = json.loads(file.read(header_bytes))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: the safetensors header is not JSON ({error}).") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: the safetensors header is a JSON {type(header).__name__}, not an object.")
    data_start, data_bytes = 8 + header_bytes, size - 8 - header_bytes
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = DTYPES[entry["dtype"]], tuple(entry["shape"]), entry["data_offsets"]
            valid = all(isinstance(d, int) and d >= 0 for d in shape) and 0 <= begin <= end <= data_bytes
        except (KeyError, TypeError, ValueError):
            valid = False
        if not valid:
            raise ValueError(f"{path}: tensor {name!r} has the header entry {entry!r}; expected a dtype of "
                             f"{sorted(DTYPES)}, a shape of non-negative integers and data_offsets within the "
                             f"{data_bytes} bytes of data.")
        if end - begin != math.prod(shape) * dtype.itemsize:
            raise ValueError(f"{path}: tensor {name!r} of shape {list(shape)} and dtype {entry['dtype']} needs "
                             f"{math.prod(shape) * dtype.itemsize} bytes, but its data_offsets span {end - begin}.")
        tensors[name] = (dtype, shape, (begin, end))
    return tensors, data_start


def read_tensors(path, header=None):
    """Every tensor of a .safetensors file as a numpy array, by name. `header` is `read_header(path)`, if read.

    Example:
    ```python
    from safetensors.numpy import save_file
    from kzoo.checkpoints.safetensors_file import read_tensors

    save_file({"bias": np.arange(3, dtype=np.float32)}, "model.safetensors")
    np.testing.assert_array_equal(read_tensors("model.safetensors")["bias"], [0.0, 1.0, 2.0])
    ```
    """
    tensors, data_start = header or read_header(path)
    with open(path, "rb") as file:
        arrays = {}
        for name, (dtype, shape, (begin, end)) in tensors.items():
            file.seek(data_start + begin)
            arrays[name] = np.frombuffer(file.read(end - begin), dtype=dtype).reshape(shape)
    return arrays
