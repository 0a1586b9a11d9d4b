"""ptxas registers, shared memory and spill stores of the float32 wgmma forms' imaged and _direct
twins (sm_90a, nvcc 13.0, the specs of Skinny.wgmma_default_spec): no GPU needed. Output:
twin_registers.txt (rows, threads, entry, imaged, _direct)."""
from concurrent.futures import ThreadPoolExecutor

import kgen.ops  # noqa: F401 - registers the families
from kgen.core import kernel as km
from kgen.core.render import render
from kgen.ops.skinny import Skinny

specs=[]
for small in (17, 24, 40, 56, 64, 96, 128, 200, 256):
    specs.append(Skinny.wgmma_default_spec({"M": small, "N": 4096, "K": 4096}, "float32"))
specs.append(Skinny.wgmma_default_spec({"M": 8, "N": 30000, "K": 4096}, "float32"))
specs.append(Skinny.wgmma_default_spec({"M": 16, "N": 30000, "K": 4096}, "float32").replace(tc_window=32))
specs=list({s.key:s for s in specs}.values())
jobs=[]
for s in specs:
    for form in ("dot","axpy"):
        for w in (4,):
            jobs.append((s,f"kgen_skinny_wg_{form}_v{w}",f"kgen_skinny_wg_{form}_direct_v{w}"))
def one(j):
    s,a,b=j
    c=km._compile_spec(s, render(s, entries=(a,b)), "sm_90a")
    ra, rb = c.resources[a], c.resources[b]
    keys=("registers","shared_bytes","spill_stores")
    return s.rows, s.threads, a, tuple(ra.get(k) for k in keys), tuple(rb.get(k) for k in keys)
with ThreadPoolExecutor(2) as ex:
    for r in ex.map(one, jobs):
        print(*r, "SAME" if r[3]==r[4] else "DIFF", flush=True)
