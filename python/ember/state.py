"""A PyTorch model's part of an Ember checkpoint (checkpoint.proto WorkerState).

``dense_parameters`` holds the model's parameters as little-endian float32, in
``named_parameters()`` order, concatenated: the contract ember-serving serves
(GetDenseParameters), so ``ember.serving`` loads them into the same model class.
``dense_optimizer_state`` holds what else a bitwise resume needs: the optimizer's state
tensors and hyper-parameters, and the model's buffers, in a self-describing format
(``EMBERPT1``, a JSON header, then raw little-endian tensors). No pickle: a checkpoint
file can never run code when it is loaded.
"""

import json
import struct

import numpy as np

from .errors import FailedPreconditionError

_MAGIC = b"EMBERPT1"


def _torch():
    import torch  # imported late: `import ember` works without torch
    return torch


def parameters_to_bytes(model):
    chunks = [p.detach().to("cpu", dtype=_torch().float32).contiguous().reshape(-1).numpy()
              for _, p in model.named_parameters()]
    if not chunks:
        return b""
    return np.concatenate(chunks).astype("<f4", copy=False).tobytes()


def load_parameters(model, data, origin="the checkpoint"):
    """Copies float32 parameters (parameters_to_bytes' layout) into ``model``."""
    torch = _torch()
    params = [p for _, p in model.named_parameters()]
    want = sum(p.numel() for p in params)
    if len(data) != want * 4:
        raise FailedPreconditionError(
            f"{origin} has {len(data) // 4} dense parameters, the model {want}: another model")
    flat = np.frombuffer(data, dtype="<f4")
    at = 0
    with torch.no_grad():
        for p in params:
            n = p.numel()
            p.copy_(torch.from_numpy(flat[at:at + n].copy()).reshape(p.shape))
            at += n


def _pack(tensors, header):
    """header (JSON-able) + tensors (name -> tensor) -> bytes."""
    entries, blobs, at = [], [], 0
    for name, t in tensors:
        a = t.detach().cpu().contiguous().numpy()
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        raw = a.tobytes()
        entries.append({"name": name, "dtype": a.dtype.str,
                        "shape": list(a.shape), "offset": at, "bytes": len(raw)})
        blobs.append(raw)
        at += len(raw)
    head = json.dumps({"header": header, "tensors": entries}).encode()
    return _MAGIC + struct.pack("<I", len(head)) + head + b"".join(blobs)


def _unpack(data, origin):
    if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + 4:
        raise FailedPreconditionError(
            f"{origin}: its dense state is not a PyTorch job's (it was written by "
            "ember-worker, or it is damaged)")
    (n,) = struct.unpack_from("<I", data, len(_MAGIC))
    start = len(_MAGIC) + 4
    doc = json.loads(data[start:start + n].decode())
    base = start + n
    tensors = {}
    torch = _torch()
    for e in doc["tensors"]:
        raw = data[base + e["offset"]:base + e["offset"] + e["bytes"]]
        a = np.frombuffer(raw, dtype=np.dtype(e["dtype"]))
        tensors[e["name"]] = torch.from_numpy(a.copy()).reshape(e["shape"])
    return doc["header"], tensors


def optimizer_state_to_bytes(model, optimizer):
    """The optimizer's state and hyper-parameters and the model's buffers."""
    torch = _torch()
    index = {id(p): i for i, (_, p) in enumerate(model.named_parameters())}
    inner = getattr(optimizer, "optimizer", optimizer)  # a DistributedOptimizer wraps one
    tensors, state_keys = [], {}
    for p, st in inner.state.items():
        i = index.get(id(p))
        if i is None:
            continue
        keys = {}
        for key, value in st.items():
            if torch.is_tensor(value):
                tensors.append((f"s/{i}/{key}", value))
                keys[key] = "tensor"
            else:
                keys[key] = value
        state_keys[str(i)] = keys
    groups = []
    for g in inner.param_groups:
        groups.append({k: v for k, v in g.items() if k != "params" and
                       isinstance(v, (int, float, bool, str, list, tuple, type(None)))})
    for name, b in model.named_buffers():
        tensors.append((f"b/{name}", b))
    return _pack(tensors, {"state": state_keys, "groups": groups})


def load_optimizer_state(model, optimizer, data, origin="the checkpoint"):
    torch = _torch()
    header, tensors = _unpack(data, origin)
    params = [p for _, p in model.named_parameters()]
    inner = getattr(optimizer, "optimizer", optimizer)
    if len(header["groups"]) != len(inner.param_groups):
        raise FailedPreconditionError(
            f"{origin}: the optimizer has {len(header['groups'])} parameter groups, this one "
            f"{len(inner.param_groups)}")
    for g, saved in zip(inner.param_groups, header["groups"]):
        for k, v in saved.items():
            g[k] = tuple(v) if isinstance(g.get(k), tuple) else v
    inner.state.clear()
    for i, keys in header["state"].items():
        p = params[int(i)]
        st = {}
        for key, kind in keys.items():
            st[key] = tensors[f"s/{i}/{key}"].to(p.device) if kind == "tensor" else kind
        inner.state[p] = st
    buffers = dict(model.named_buffers())
    with torch.no_grad():
        for name, b in buffers.items():
            saved = tensors.get(f"b/{name}")
            if saved is None or tuple(saved.shape) != tuple(b.shape):
                raise FailedPreconditionError(f"{origin}: model buffer '{name}' is missing or "
                                              "has another shape")
            b.copy_(saved)
