"""Host time of one kernel launch from Python, by launch API, warm (back to back, a sync
every 64) and cold (a sync before each). The kernel is empty (launch_api_empty.cu, built
here with nvcc) with the skinny kernels' 17 parameters, so only the host path is timed:
kgen's Launch, the same ctypes call with argtypes set (kgen's previous path), with a
kernelParams array, pycuda's prepared call, CuPy's RawKernel, and a torch op for scale.
Run from the repository root: python3 docs/bench/research/launch_api.py"""
import ctypes, os, statistics, struct, subprocess, tempfile, time
import torch
from kgen.core import runtime
from kgen.core.launch import DriverModule, Launch, ensure_context

pc = time.perf_counter_ns
here = os.path.dirname(os.path.abspath(__file__))
cubin_path = os.path.join(tempfile.mkdtemp(), "empty.cubin")
subprocess.run(["nvcc", "-cubin", "-gencode=arch=compute_90,code=sm_90", "-o", cubin_path,
                os.path.join(here, "launch_api_empty.cu")], check=True)
cubin = open(cubin_path, "rb").read()
runtime.driver(); ensure_context()
module = DriverModule(cubin)   # kept: unloading it would invalidate the function handle
fn = module.function("empty")
fmt = "PqqPqPqqiiqqffPPi"
x = torch.zeros(16, device="cuda")
p = x.data_ptr()
args = (p, 1, 1, p, 1, p, 1, 1, 4, 4096, 4096, 512, 1.0, 0.0, p, p, 2)
h = torch.cuda.current_stream().cuda_stream
kgen_launch = Launch(fn, "empty", (64, 1, 1), (256, 1, 1), 0, fmt)

# ctypes with argtypes on every call (a handle of its own, so kgen's stays as it is)
lib = ctypes.PyDLL("libcuda.so.1")
go = lib.cuLaunchKernel
go.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
go.restype = ctypes.c_int
packer = struct.Struct("@" + fmt)
buf = (ctypes.c_char * packer.size)()
size = ctypes.c_size_t(packer.size)
extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)
def argtypes_extra():
    packer.pack_into(buf, 0, *args)
    return go(fn, 64, 1, 1, 256, 1, 1, 0, h, None, extra)
types_ = [ctypes.c_uint64, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint64, ctypes.c_int64, ctypes.c_uint64, ctypes.c_int64,
          ctypes.c_int64, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_float, ctypes.c_float,
          ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32]
vals = [t(v) for t, v in zip(types_, args)]
params = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
def argtypes_params():
    vals[0].value = p; vals[3].value = p; vals[5].value = p
    return go(fn, 64, 1, 1, 256, 1, 1, 0, h, params, None)

import pycuda.driver as drv
pf = drv.module_from_buffer(cubin).get_function("empty")
pf.prepare(fmt)
pstream = drv.Stream()
def pycuda_prepared():
    pf.prepared_async_call((64, 1), (256, 1, 1), pstream, *args)

cases = [("kgen Launch (no argtypes, objects made once)", lambda: kgen_launch(h, *args)),
         ("ctypes, argtypes, packed buffer", argtypes_extra),
         ("ctypes, argtypes, kernelParams", argtypes_params),
         ("pycuda prepared_async_call", pycuda_prepared)]
try:
    import cupy
    cf = cupy.RawModule(path=cubin_path).get_function("empty")
    cargs = (p, 1, 1, p, 1, p, 1, 1, 4, 4096, 4096, 512, cupy.float32(1.0), cupy.float32(0.0), p, p, 2)
    cases.append(("CuPy RawKernel", lambda: cf((64,), (256,), cargs)))
except Exception as exc:  # noqa: BLE001
    print("CuPy skipped:", exc)
cases.append(("torch: x.add_(1) (a whole op)", lambda: x.add_(1.0)))
for name, f in cases:
    line = []
    for mode in ("warm", "cold"):
        ts = []
        for i in range(600):
            if mode == "cold" or i % 64 == 0:
                torch.cuda.synchronize()
            t0 = pc(); f(); ts.append((pc() - t0) / 1e3)
        torch.cuda.synchronize()
        line.append(f"{mode} {statistics.median(ts[50:]):5.2f} us")
    print(f"{name:46s} " + ", ".join(line), flush=True)
