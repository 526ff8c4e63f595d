"""The fsdpc attention plugins (flash on the GPU, naive on the CPU) called
from Python through ctypes, on torch tensors, exactly as the core calls them
through the plugin ABI (core/include/fsdpc/plugin.h, fsdpc_attention_v1)."""
import ctypes as C
import os

import torch

BF16, F32 = 1, 0
CPU, CUDA = 0, 1


class HostApi(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("abi_major", C.c_uint32), ("abi_minor", C.c_uint32),
                ("host_version", C.c_char_p), ("host_ctx", C.c_void_p), ("log", C.c_void_p),
                ("set_error", C.c_void_p), ("alloc", C.c_void_p), ("free", C.c_void_p),
                ("opt_get", C.c_void_p), ("device_info", C.c_void_p)]


class ComponentDesc(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("kind", C.c_int32), ("name", C.c_char_p),
                ("version", C.c_char_p), ("iface_version", C.c_uint32),
                ("default_score", C.c_int32), ("description", C.c_char_p),
                ("capabilities", C.c_char_p), ("options", C.c_void_p), ("n_options", C.c_uint32),
                ("vtable", C.c_void_p)]


class PluginDesc(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("abi_major", C.c_uint32), ("abi_minor", C.c_uint32),
                ("name", C.c_char_p), ("components", C.POINTER(C.POINTER(ComponentDesc))),
                ("n_components", C.c_uint32)]


class Shape(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("B", C.c_int32), ("T", C.c_int32),
                ("NH", C.c_int32), ("KVH", C.c_int32), ("HD", C.c_int32), ("causal", C.c_int32),
                ("scale", C.c_float), ("dtype", C.c_int32), ("device", C.c_int32),
                ("doc_ids", C.c_void_p)]


class Sizes(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("saved_bytes", C.c_uint64),
                ("fwd_workspace", C.c_uint64), ("bwd_workspace", C.c_uint64)]


P = C.c_void_p
SHAPE_P = C.POINTER(Shape)
FN_SUPPORTS = C.CFUNCTYPE(C.c_int32, SHAPE_P)
FN_SIZES = C.CFUNCTYPE(C.c_int32, P, SHAPE_P, C.POINTER(Sizes))
FN_FWD = C.CFUNCTYPE(C.c_int32, P, SHAPE_P, P, P, P, P, P, P, P)
FN_BWD = C.CFUNCTYPE(C.c_int32, P, SHAPE_P, P, P, P, P, P, P, P, P, P, P, P)


class AttentionV1(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("supports", FN_SUPPORTS), ("create", P),
                ("destroy", P), ("sizes", FN_SIZES), ("forward", FN_FWD), ("backward", FN_BWD)]


_last_error = [""]
_SET_ERROR = C.CFUNCTYPE(None, P, C.c_int32, C.c_char_p)(
    lambda ctx, st, msg: _last_error.__setitem__(0, msg.decode()))
_LOG = C.CFUNCTYPE(None, P, C.c_int32, C.c_char_p)(lambda ctx, lvl, msg: None)
_HOST = HostApi(C.sizeof(HostApi), 1, 0, b"bench", None, C.cast(_LOG, P).value,
                C.cast(_SET_ERROR, P).value, None, None, None, None)


class Plugin:
    def __init__(self, plugin_dir, name):
        self.lib = C.CDLL(os.path.join(plugin_dir, f"libfsdpc-attention-{name}.so"))
        entry = self.lib.fsdpc_plugin_entry_v1
        entry.restype = C.c_int32
        entry.argtypes = [C.POINTER(HostApi), C.POINTER(C.POINTER(PluginDesc))]
        desc = C.POINTER(PluginDesc)()
        if entry(C.byref(_HOST), C.byref(desc)) != 0:
            raise RuntimeError(f"{name}: entry failed: {_last_error[0]}")
        self.comp = desc.contents.components[0].contents
        self.v = C.cast(self.comp.vtable, C.POINTER(AttentionV1)).contents

    def shape(self, B, T, NH, KVH, HD, causal, dtype, device, doc=None):
        return Shape(C.sizeof(Shape), B, T, NH, KVH, HD, int(causal), HD ** -0.5, dtype, device,
                     doc.data_ptr() if doc is not None else None)

    def supports(self, s):
        return self.v.supports(C.byref(s)) == 0

    def sizes(self, s):
        z = Sizes(C.sizeof(Sizes), 0, 0, 0)
        self._ok(self.v.sizes(None, C.byref(s), C.byref(z)))
        return z

    def _ok(self, rc):
        if rc != 0:
            raise RuntimeError(f"{self.comp.name.decode()}: status {rc}: {_last_error[0]}")

    @staticmethod
    def _stream(t):
        return torch.cuda.current_stream().cuda_stream if t.is_cuda else None

    def forward(self, s, q, k, v, out, saved, ws):
        self._ok(self.v.forward(None, C.byref(s), q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                out.data_ptr(), saved.data_ptr(), ws.data_ptr() if ws is not None
                                else None, self._stream(q)))

    def backward(self, s, q, k, v, out, dout, saved, dq, dk, dv, ws):
        self._ok(self.v.backward(None, C.byref(s), q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                 out.data_ptr(), dout.data_ptr(), saved.data_ptr(), dq.data_ptr(),
                                 dk.data_ptr(), dv.data_ptr(), ws.data_ptr(), self._stream(q)))


class Flash:
    """flash on (B, T, NH, HD) / (B, T, KVH, HD) bf16 CUDA tensors."""

    def __init__(self, plugin_dir):
        self.p = Plugin(plugin_dir, "flash")

    def setup(self, q, k, causal=True, doc=None):
        B, T, NH, HD = q.shape
        s = self.p.shape(B, T, NH, k.shape[2], HD, causal, BF16, CUDA, doc)
        if not self.p.supports(s):
            raise RuntimeError(f"flash does not support {tuple(q.shape)}: {_last_error[0]}")
        z = self.p.sizes(s)
        saved = torch.empty(z.saved_bytes // 4, dtype=torch.float32, device=q.device)
        ws = torch.empty(max(z.bwd_workspace, 16), dtype=torch.uint8, device=q.device)
        return s, saved, ws

    def fwd(self, st, q, k, v, out):
        s, saved, ws = st
        self.p.forward(s, q, k, v, out, saved, None)

    def bwd(self, st, q, k, v, out, dout, dq, dk, dv):
        s, saved, ws = st
        self.p.backward(s, q, k, v, out, dout, saved, dq, dk, dv, ws)
