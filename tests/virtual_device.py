"""A pretend accelerator for CPU-only machines: catch CPU tensors fed to a model on "cuda".

On Colab, ``train()`` moves a model to CUDA, and any CPU tensor that a later
cell feeds it fails with "Expected all tensors to be on the same device". A
CPU-only test machine never sees that. Inside ``VirtualDevice("cuda")``:

- ``tensor.to("cuda")``, ``model.to("cuda")`` and factories called with
  ``device="cuda"`` give tensors that report ``device.type == "cuda"`` but keep
  their real values in CPU memory, so every number can still be computed;
- an operation that mixes such a tensor with an ordinary CPU tensor (other than
  a 0-dimensional one, which CUDA also accepts) raises ``DeviceMismatch``, as
  CUDA would;
- ``.cpu()``, ``.item()`` and ``.tolist()`` work as on a real device;
- ``nn.LSTM`` is checked once per call and computed by the fused CPU kernel
  (``_lstm_on_cpu``): off the CPU, torch runs it as a loop of small operations.

Unlike ``torch._subclasses.fake_tensor.FakeTensorMode``, which also fakes a
CUDA device on a CPU build but has no values, this runs whole chapters:
training, evaluation, plots and exercises.
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


class DeviceMismatch(RuntimeError):
    """A CPU tensor met a tensor on the (virtual) accelerator."""


class OnDevice(torch.Tensor):
    """A tensor that says it lives on the virtual device; ``elem`` holds its values on the CPU."""

    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor, device: torch.device):
        out = torch.Tensor._make_wrapper_subclass(
            cls, elem.shape, strides=elem.stride(), storage_offset=elem.storage_offset(), dtype=elem.dtype,
            layout=elem.layout, device=device, requires_grad=elem.requires_grad)
        out.elem = elem
        return out

    def __repr__(self) -> str:
        return f"OnDevice({self.elem!r}, device='{self.device}')"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError("OnDevice tensors are only usable inside VirtualDevice()")


class _Moves(TorchFunctionMode):
    """Python-level device moves (``.to``, ``.cuda()``, ``.cpu()``, ``device=`` of ``as_tensor``),
    rewritten as ``aten._to_copy``, which the dispatch mode below can serve without a CUDA runtime."""

    MOVES = {torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu, torch.as_tensor, torch.tensor, torch.Tensor.tolist,
             torch.Tensor.__getitem__, torch.Tensor.__setitem__}

    def __init__(self, device: torch.device):
        super().__init__()
        self.device = device

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        # nn.LSTM's call on padded batches, torch.lstm(input, (h0, c0), weights, ...), not the packed one's
        if (func is torch.lstm and not kwargs and isinstance(args[1], (tuple, list))
                and any(isinstance(t, OnDevice) for t in _leaves(args))):
            return _lstm_on_cpu(self.device, *args)
        if func not in self.MOVES:
            return func(*args, **kwargs)
        if func in (torch.as_tensor, torch.tensor):
            device = kwargs.pop("device", None)
            out = func(*args, **kwargs)
            return out if device is None else self._move(out, torch.device(device), None)
        self_, rest = args[0], args[1:]
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__):
            # C++ would turn a list index into a tensor on the device without asking us: make it a CPU
            # index tensor instead, which CUDA accepts for indexing
            idx = rest[0]
            lists = lambda i: torch.tensor(i) if isinstance(i, list) else i  # noqa: E731
            idx = tuple(lists(i) for i in idx) if isinstance(idx, tuple) else lists(idx)
            return func(self_, idx, *rest[1:], **kwargs)
        if func is torch.Tensor.tolist:
            return self_.elem.tolist() if isinstance(self_, OnDevice) else func(*args, **kwargs)
        if func is torch.Tensor.cpu:
            return self._move(self_, torch.device("cpu"), None)
        if func is torch.Tensor.cuda:
            return self._move(self_, self.device, None)
        device, dtype, _, _ = torch._C._nn._parse_to(*rest, **kwargs)
        if len(rest) and isinstance(rest[0], torch.Tensor):                # x.to(other): other's device and dtype
            device, dtype = rest[0].device, rest[0].dtype
        return self._move(self_, device, dtype)

    def _move(self, t: torch.Tensor, device, dtype):
        device = t.device if device is None else torch.device(device.type)
        dtype = dtype or t.dtype
        if device == t.device and dtype == t.dtype:
            return t
        return torch.ops.aten._to_copy(t, dtype=dtype, device=device)


class VirtualDevice(TorchDispatchMode):
    """Context manager: pretend that ``device`` ("cuda" or "mps") exists, and check every operation."""

    def __init__(self, device: str = "cuda"):
        super().__init__()
        self.device = torch.device(device)
        self.moves = _Moves(self.device)
        self.ops = 0

    def __enter__(self):
        self.moves.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        out = super().__exit__(*exc)
        self.moves.__exit__(*exc)
        return out

    def _is_ours(self, d) -> bool:
        return d is not None and torch.device(d).type == self.device.type

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        self.ops += 1
        on_dev, on_cpu = [], []

        def unwrap(t):
            if isinstance(t, OnDevice):
                on_dev.append(t)
                return t.elem
            if isinstance(t, torch.Tensor) and t.device.type == self.device.type:
                raise RuntimeError(f"{func.__name__}: a tensor made on {self.device} outside VirtualDevice's "
                                   f"view; its values are unknown, so this path cannot be checked")
            if isinstance(t, torch.Tensor) and t.dim() > 0 and t.device.type == "cpu":
                on_cpu.append(t)
            return t

        name = func.__name__
        if name.startswith(("index.Tensor", "index_put", "_index_put")):
            # CUDA accepts index tensors on the CPU: check the indexed tensor and the values only
            indices = args[1]
            args = (args[0], None) + tuple(args[2:])
            args, kwargs = _map(unwrap, (args, kwargs))
            args = (args[0], [i.elem if isinstance(i, OnDevice) else i for i in indices]) + tuple(args[2:])
        else:
            args, kwargs = _map(unwrap, (args, kwargs))
        target = kwargs.get("device")
        explicit = target is not None
        if explicit and self._is_ours(target):
            kwargs["device"] = torch.device("cpu")
        # ops that copy between devices, or only read metadata, may mix devices
        moves = name.startswith(("_to_copy", "copy_", "_copy_from", "lift_fresh", "detach", "alias", "_local_scalar"))
        if on_dev and on_cpu and not moves:
            raise _mismatch(name, self.device, on_cpu)
        out = func(*args, **kwargs)
        mine = {id(t.elem): t for t in on_dev}
        if mine and any(id(t) in mine for t in _leaves(out)):
            # in place (add_, copy_, out=...): hand back the very tensors that were changed
            return _map(lambda t: mine.get(id(t), t), out)
        if not (self._is_ours(target) if explicit else bool(on_dev)):
            return out
        return _map(lambda t: OnDevice(t, self.device), out)


def _mismatch(name: str, device: torch.device, on_cpu: list[torch.Tensor]) -> DeviceMismatch:
    shapes = ", ".join(str(tuple(t.shape)) for t in on_cpu[:3])
    return DeviceMismatch(f"{name}: expected all tensors on {device}, but found CPU tensor(s) of shape {shapes}; "
                          f"move them with the package's helpers (tensor.to(device))")


def _lstm_on_cpu(device: torch.device, input, hx, params, *flags):
    """``torch.lstm`` (``nn.LSTM``) on the values, in one fused CPU call.

    Off the CPU, ``torch.lstm`` falls back to a loop over time steps of small operations, each of which
    this module's dispatch mode would intercept: hundreds of times slower. Here the device check is done
    once on the arguments, the CPU kernel computes the values, and ``_CpuIsland`` carries the gradients."""
    tensors = [input, *hx, *params]
    cpu = [t for t in tensors if not isinstance(t, OnDevice) and t.dim() > 0]
    if cpu:
        raise _mismatch("lstm", device, cpu)
    n_hx = len(hx)

    def lstm(*values):
        return torch.lstm(values[0], tuple(values[1:1 + n_hx]), list(values[1 + n_hx:]), *flags)

    if not torch.is_grad_enabled():                                     # evaluation: no graph to keep
        return tuple(OnDevice(o, device) for o in lstm(*(t.elem for t in tensors)))
    return _CpuIsland.apply(lstm, device, *tensors)


class _CpuIsland(torch.autograd.Function):
    """``fn`` computed on the CPU values of its arguments, with its own CPU graph for the backward pass;
    the results, and the gradients handed back, are tensors on the virtual device."""

    @staticmethod
    def forward(ctx, fn, device, *tensors):
        values = [t.elem.detach().requires_grad_(t.requires_grad) for t in tensors]
        with torch.enable_grad():
            outs = fn(*values)
        ctx.values, ctx.outs, ctx.device = values, outs, device
        return tuple(OnDevice(o.detach(), device) for o in outs)

    @staticmethod
    def backward(ctx, *grads):
        wanted = [v for v in ctx.values if v.requires_grad]
        pairs = [(o, g.elem if isinstance(g, OnDevice) else g) for o, g in zip(ctx.outs, grads)
                 if g is not None and o.requires_grad]
        found = iter(torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs], allow_unused=True)
                     if pairs and wanted else [None] * len(wanted))
        out = [next(found) if v.requires_grad else None for v in ctx.values]
        return (None, None, *(None if g is None else OnDevice(g, ctx.device) for g in out))


def _map(fn, tree):
    """``fn`` applied to every tensor of ``tree`` (tensors in tuples, lists and dicts, as aten ops take and give
    them), the rest kept: torch's ``tree_map``, without its generality, which costs more than the operation."""
    if isinstance(tree, torch.Tensor):
        return fn(tree)
    kind = type(tree)
    if kind is tuple or kind is list:
        return kind([_map(fn, x) for x in tree])
    if kind is dict:
        return {k: _map(fn, v) for k, v in tree.items()}
    return tree


def _leaves(tree):
    """Every tensor of ``tree`` (as ``_map`` finds them), in order."""
    if isinstance(tree, torch.Tensor):
        yield tree
    elif type(tree) in (tuple, list):
        for x in tree:
            yield from _leaves(x)
    elif type(tree) is dict:
        for x in tree.values():
            yield from _leaves(x)
