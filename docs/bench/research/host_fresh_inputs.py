"""Host and device time of kgen.matmul's repeat path on bfloat16 few-row products, against
torch: the same A every call and a new A each call (48 rotating tensors), single calls and
back to back, a CUDA graph; the host cost of each step of the path (the key, the stream, the
result, the descriptors, the launch); and cuLaunchKernel through a small C extension instead of
ctypes, where it was built beside this script from host_fresh_inputs_launch.c (gcc -O2 -shared
-fPIC -I<Python include> host_fresh_inputs_launch.c -o _claunch<EXT_SUFFIX> -ldl).
Output $OUT/probe1.json."""
import json, os, sys
import torch
import kgen
from kgen.bench.skinny import host_us as bench_host_us
from kgen.bench.skinny import time_graph
from kgen.core import runtime, launch as L
from kgen.core.timing import time_calls
from kgen.tune import dispatch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import _claunch
except Exception as e:
    _claunch = None
    print("no C launcher:", e)

torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
dt = torch.bfloat16
SH = [(16, 4096, 4096), (3, 10752, 11968), (23, 6080, 10560), (87, 1984, 7808), (125, 2048, 2432),
      (189, 9792, 1088), (161, 3008, 10560), (40, 4096, 4096), (7, 4608, 2112)]
OUT = os.environ.get("OUT", "/tmp")


def host_us(fn, n=2000):
    return bench_host_us(torch, fn, n)


def graph_us(fn, n=20):
    return time_graph(torch, [fn] * n, 15)


def single(fn, reps=300):
    return time_calls(fn, warmup=5, repeats=reps).median_ms * 1e3


def pipe(fn):
    return time_calls(fn, warmup=5, repeats=10, inner=100).median_ms * 1e3


orig_call = L.Launch.__call__


def c_call(self, stream, *args):
    self._pack(self._buf, 0, *args)
    code = _claunch.launch(self._fn_arg.value, *self._geom, stream, self._extra_arg.value)
    if code:
        raise L.LaunchError(f"launch failed {code}")


res = {"device": torch.cuda.get_device_name(), "rows": []}
for M, N, K in SH:
    for order in ("col", "row"):
        if order == "row" and M not in (16, 87, 125):
            continue
        A = torch.randn(M, K, device="cuda", dtype=dt)
        B = torch.randn(N, K, device="cuda", dtype=dt).t() if order == "col" else torch.randn(K, N, device="cuda", dtype=dt)
        As = [torch.randn(M, K, device="cuda", dtype=dt) for _ in range(48)]
        out = torch.empty(M, N, device="cuda", dtype=dt)
        ref = A.double() @ B.double()
        C = kgen.matmul(A, B)
        torch.cuda.synchronize()
        err = float((C.double() - ref).norm() / ref.norm())
        k = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
        row = {"shape": [M, N, K], "order": order, "err": err, "spec": getattr(k, "spec", None) and k.spec.to_json()}
        it = [0]

        def fresh():
            it[0] = (it[0] + 1) % 48
            return kgen.matmul(As[it[0]], B)

        def fresh_t():
            it[0] = (it[0] + 1) % 48
            return torch.matmul(As[it[0]], B)

        fns = {"kgen": lambda: kgen.matmul(A, B), "torch": lambda: torch.matmul(A, B),
               "kgen fresh": fresh, "torch fresh": fresh_t}
        for name, fn in fns.items():
            r = {"host_us": host_us(fn), "single_us": single(fn), "pipe_us": pipe(fn)}
            row[name] = r
        row["kgen graph_us"] = graph_us(lambda: kgen.matmul(A, B, out=out))
        row["torch graph_us"] = graph_us(lambda: torch.mm(A, B, out=out))
        if _claunch is not None:
            L.Launch.__call__ = c_call
            try:
                C2 = kgen.matmul(A, B)
                torch.cuda.synchronize()
                row["c err"] = float((C2.double() - ref).norm() / ref.norm())
                row["kgen C launcher"] = {"host_us": host_us(fns["kgen"]), "single_us": single(fns["kgen"]),
                                          "pipe_us": pipe(fns["kgen"])}
                row["kgen fresh C launcher"] = {"host_us": host_us(fresh), "single_us": single(fresh)}
            finally:
                L.Launch.__call__ = orig_call
        res["rows"].append(row)
        print(json.dumps(row), flush=True)

# step costs on the first product
M, N, K = SH[0]
A = torch.randn(M, K, device="cuda", dtype=dt)
B = torch.randn(N, K, device="cuda", dtype=dt).t()
kgen.matmul(A, B)
torch.cuda.synchronize()
pa, pb = A.data_ptr(), B.data_ptr()
k = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
shape, odt, plan, device = k._torch_hit(A, B, pa, pb, None)
maps = plan[7]
from kgen.core.tma import encode_tiled_2d
steps = {
    "noop": lambda: None,
    "torch_tensor_type": lambda: runtime.torch_tensor_type(),
    "key": lambda: (A.shape, A.stride(), B.shape, B.stride(), A.dtype, B.dtype, A.get_device(), B.get_device(),
                    A.data_ptr() & 15, B.data_ptr() & 15, False),
    "data_ptr x2": lambda: (A.data_ptr(), B.data_ptr()),
    "shape+stride x2": lambda: (A.shape, A.stride(), B.shape, B.stride()),
    "dtype,get_device x2": lambda: (A.dtype, B.dtype, A.get_device(), B.get_device()),
    "torch_stream": lambda: runtime.torch_stream(0),
    "results.new": lambda: k._torch_results.new(A, shape, 0, runtime.torch_stream(0), odt),
    "maps.encoded hit": lambda: maps.encoded(pa, pb),
    "encode_tiled_2d": lambda: encode_tiled_2d(maps.dtype, pa, *maps.a),
    "kgen.matmul": lambda: kgen.matmul(A, B),
}
st = {}
for name, fn in steps.items():
    st[name] = host_us(fn, 5000)
main, args = plan[2], plan[3]
ma, mb = maps.encoded(pa, pb)
C = torch.empty(M, N, device="cuda", dtype=dt)
h = runtime.torch_stream(0)
st["Launch ctypes"] = host_us(lambda: main(h, ma, mb, C.data_ptr(), *args, 1.0, 0.0), 5000)
if _claunch is not None:
    L.Launch.__call__ = c_call
    st["Launch C"] = host_us(lambda: main(h, ma, mb, C.data_ptr(), *args, 1.0, 0.0), 5000)
    L.Launch.__call__ = orig_call
res["steps_us"] = st
print(json.dumps(st), flush=True)
json.dump(res, open(OUT + "/probe1.json", "w"), indent=1)
