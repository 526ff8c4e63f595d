"""A safetensors folder's fp32 tensors as numpy arrays, for the script
tests that compare exported weights (model.safetensors of an fsdpc full
export with checkpoint.final_dtype fp32, or a small HF folder).

load(folder) -> {name: 1-D float32 array}; tensors of other dtypes are left
out (the caller asserts the names it expects)."""
import json
import struct

import numpy as np


def load(folder):
    raw = open(folder + "/model.safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], dtype=np.float32)
            for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32"}
