"""q/k capture on an unmodified llama.cpp: the scheduler's eval callback (`cb_eval` in the context parameters) copies
the selected layers' post-RoPE queries and keys into the transformers backend's `QKRecorder`, so the same replay
(`backends.replay`) and policy run on them.

What this llama.cpp (llama-cpp-python 0.3.36) does, found by listing the graph of the embedded Qwen2 model:
- With a callback set, `ggml_backend_sched_compute_splits` offers every graph node (about 940 per graph for 24
  layers) with ask=True; a node answered True ends a sub-graph, which is computed, and the callback gets it again with
  ask=False and the data ready. Nodes never asked for cost one Python call each (a name lookup), nothing else; the
  ops computed are the same, so outputs are unchanged (tested: identical greedy tokens).
- Qwen2's layer l names four nodes `Qcur-l` (MUL_MAT, ADD bias, RESHAPE, ROPE) and four `Kcur-l`; the ROPE one is
  what attention consumes. Its ggml shape is ne = [head_dim, heads, tokens] (ne0 fastest), contiguous F32, i.e. numpy
  [tokens, heads, head_dim]; the query node comes before the key node of its layer. K then goes into the KV cache
  (SET_ROWS into `cache_k_l<l>`, F16 by default) and, without flash attention, `kq-l = mul_mat(K cache, Q)` converts Q
  to the cache's type too, then `kq_soft_max-l` applies the scale 1/sqrt(head_dim) and the causal mask. The recorder
  therefore keeps q and k rounded to the K cache's type: the replay computes what the kernel computed (tested against
  llama.cpp's own `kq_soft_max` node).
- The callback runs on the thread that called `llama_decode`; an exception inside it cannot cross the C boundary, so
  it is kept and raised after the decode (returning False at ask=False would silently stop the graph).
"""
from __future__ import annotations

import ctypes

import numpy as np

from backends.recorder import QKRecorder

GGML_TYPE_F32, GGML_TYPE_F16 = 0, 1
KERNEL_DTYPES = {GGML_TYPE_F32: np.float32, GGML_TYPE_F16: np.float16}  # a K cache's ggml type -> numpy
# Architectures whose llama.cpp graph was checked to build Qcur-l/Kcur-l after RoPE and score them with
# softmax(q.k / sqrt(head_dim)) under a plain causal mask (no sliding window, no softcap, no extra scale).
CAPTURE_ARCHITECTURES = ("qwen2",)


class GgmlTensor(ctypes.Structure):
    """`struct ggml_tensor` of ggml.h in the pinned llama.cpp (GGML_MAX_DIMS 4, GGML_MAX_OP_PARAMS 64,
    GGML_MAX_SRC 10, GGML_MAX_NAME 64)."""

    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64),
                ("extra", ctypes.c_void_p), ("padding", ctypes.c_char * 8)]


NAME_OFFSET = GgmlTensor.name.offset


def ggml_library():
    """libggml with the two functions used here typed (llama-cpp-python loads it as `llama_cpp._ggml.libggml`)."""
    from llama_cpp._ggml import libggml

    libggml.ggml_op_name.restype = ctypes.c_char_p
    libggml.ggml_op_name.argtypes = [ctypes.c_int]
    libggml.ggml_backend_tensor_get.restype = None
    libggml.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    return libggml


def op_id(libggml, name: str) -> int:
    """The `enum ggml_op` value named `name` (the numbering changes between ggml versions; the names do not)."""
    for value in range(1024):
        op_name = libggml.ggml_op_name(value)
        if op_name is None:
            break
        if op_name.decode() == name:
            return value
    raise RuntimeError(f"this ggml has no op named {name!r}")


def read_f32(libggml, address: int) -> np.ndarray:
    """A contiguous F32 node's data as numpy, shape [ne3, ne2, ne1, ne0] with size-1 leading axes dropped."""
    tensor = GgmlTensor.from_address(address)
    shape = tuple(int(n) for n in reversed(tensor.ne))
    if tensor.type != GGML_TYPE_F32 or tensor.nb[0] != 4 or any(
            tensor.nb[i] != tensor.nb[i - 1] * tensor.ne[i - 1] for i in range(1, 4)):
        raise RuntimeError(f"node {tensor.name.decode()!r} is not a contiguous F32 tensor (type {tensor.type}); "
                           f"this llama.cpp build lays out its graph differently from the one capture was written for")
    data = np.empty(shape, dtype=np.float32)
    libggml.ggml_backend_tensor_get(address, data.ctypes.data, 0, data.nbytes)  # works for any backend's buffer
    while data.ndim > 1 and data.shape[0] == 1:
        data = data[0]
    return data


class EvalCallbackCapture:
    """Feeds a `QKRecorder` from llama.cpp's graph nodes. The session announces each batch (`begin`); the callback
    asks for `Kcur-l` of every recorded layer and, while queries are recorded (draft rows), `Qcur-l`, both after RoPE.

    `callback` is the ctypes function to put in the context parameters; this object must outlive the context."""

    def __init__(self, recorder: QKRecorder):
        self.recorder = recorder
        self.libggml = ggml_library()
        self.rope = op_id(self.libggml, "ROPE")
        self.wanted: dict[bytes, tuple[str, int]] = {}
        for layer in recorder.layers:
            self.wanted[f"Qcur-{layer}".encode()] = ("query", layer)
            self.wanted[f"Kcur-{layer}".encode()] = ("key", layer)
        self.record_queries = False
        self.expected_rows = 0
        self.queries: dict[int, np.ndarray] = {}
        self.error: BaseException | None = None
        self.n_head = self.head_dim = 0
        self.kernel_dtype = np.float32
        self.attention_kwargs: dict = {}
        import llama_cpp

        self.callback = llama_cpp.ggml_backend_sched_eval_callback(self._on_node)

    def configure(self, llama) -> None:
        """Read the geometry of the model and context the callback was installed in (`llama_cpp.Llama`), and refuse
        models or heads capture cannot serve."""
        import llama_cpp

        model = llama._model.model
        architecture = llama.metadata.get("general.architecture", "?")
        if architecture not in CAPTURE_ARCHITECTURES:
            raise ValueError(f"q/k capture on llama.cpp is verified for {', '.join(CAPTURE_ARCHITECTURES)} models "
                             f"only, not {architecture!r}: use backend hf (or check this architecture's graph node "
                             f"names and attention algebra, see backends/llama_cpp/capture.py, and add it)")
        n_layer = llama_cpp.llama_model_n_layer(model)
        self.n_head = llama_cpp.llama_model_n_head(model)
        self.head_dim = llama_cpp.llama_model_n_embd(model) // self.n_head
        for layer, head in self.recorder.heads:
            if not (0 <= layer < n_layer and 0 <= head < self.n_head):
                raise ValueError(f"head ({layer}, {head}) does not exist: the model has {n_layer} layers of "
                                 f"{self.n_head} query heads")
        kernel_type = int(llama.context_params.type_k)
        if kernel_type not in KERNEL_DTYPES:
            raise ValueError(f"q/k capture replays F32 or F16 K caches, not ggml type {kernel_type}")
        self.kernel_dtype = KERNEL_DTYPES[kernel_type]
        self.attention_kwargs = {"scaling": self.head_dim ** -0.5, "sliding_window": None, "softcap": None}

    def begin(self, start: int, count: int, record_queries: bool) -> None:
        """The next graph computes positions [start, start + count)."""
        self.recorder.begin(start, count, record_queries)
        self.record_queries, self.expected_rows = record_queries, count
        self.queries.clear()

    def raise_error(self) -> None:
        """Raise what went wrong inside the callback during the last decode, if anything."""
        if self.error is not None:
            error, self.error = self.error, None
            raise RuntimeError(f"q/k capture failed inside llama.cpp's eval callback: {error}") from error

    def _on_node(self, address: int, ask: bool, user_data) -> bool:
        try:
            if ask:
                wanted = self.wanted.get(ctypes.string_at(address + NAME_OFFSET))
                if wanted is None or (wanted[0] == "query" and not self.record_queries):
                    return False
                return GgmlTensor.from_address(address).op == self.rope
            self._read(address)
        except BaseException as error:  # noqa: BLE001 (must not cross into C; raised after the decode)
            self.error = self.error or error
        return True  # ask=False: always go on computing the graph

    def _read(self, address: int) -> None:
        kind, layer = self.wanted[ctypes.string_at(address + NAME_OFFSET)]
        rows = read_f32(self.libggml, address)  # [tokens, heads, head_dim]
        if rows.ndim == 2:
            rows = rows[None]
        if rows.shape[0] != self.expected_rows or rows.shape[2] != self.head_dim:
            raise RuntimeError(f"{kind} node of layer {layer} has shape {rows.shape}, expected "
                               f"[{self.expected_rows}, heads, {self.head_dim}] (one graph per batch)")
        # As the kernel multiplies them: rounded to the K cache's type ([1, heads, tokens, head_dim] like transformers).
        rows = rows.astype(self.kernel_dtype).transpose(1, 0, 2)[None]
        if kind == "query":
            self.queries[layer] = rows
            return
        query = self.queries.pop(layer, None)
        if query is None:  # keys only (prompt rows): the recorder reads the head count from the query's shape
            query = np.empty((1, self.n_head, 0, self.head_dim), dtype=self.kernel_dtype)
        self.recorder.record(layer, query, rows, self.attention_kwargs)
