"""How long nvcc takes over one spec's rendered module, with kgen's options as they are, with
-split-compile=0 (the module's functions optimised in parallel, a thread per CPU) and with
ptxas's --split-compile=0 as well; the cubin's size beside each. No GPU needed (the host's CPUs
decide the result). Run from the repository root; output on stdout."""
import os
import subprocess
import tempfile
import time

import kgen
from kgen.core.compiler import BASE_OPTIONS, find_nvcc
from kgen.ops.skinny import Skinny
from kgen.ops.tensorcore import TensorMatmul

SPECS = {
    "skinny f32 8 rows": Skinny.default_spec({"M": 8, "N": 4096, "K": 4096}, "float32"),
    "skinny f32 1 row": Skinny.default_spec({"M": 1, "N": 4096, "K": 4096}, "float32"),
    "skinny f32 wgmma 24 rows": Skinny.default_spec({"M": 24, "N": 4096, "K": 4096}, "float32").replace(
        instruction="wgmma"),
    "tensor bf16 swap": TensorMatmul.swap_spec({"M": 8, "N": 4096, "K": 4096}, "bfloat16"),
}
EXTRAS = ([], ["-split-compile=0"], ["-split-compile=0", "-Xptxas", "--split-compile=0"])


def main():
    nvcc, work = find_nvcc(), tempfile.mkdtemp()
    src, cubin = os.path.join(work, "k.cu"), os.path.join(work, "k.cubin")
    for name, spec in SPECS.items():
        with open(src, "w") as f:
            f.write(kgen.render(spec))
        options = [o for o in spec.compile_options() if not o.startswith("-split-compile")]
        for extra in EXTRAS:
            start = time.time()
            run = subprocess.run([nvcc, "-cubin", f"-arch={spec.target_arch('sm_90')}", *BASE_OPTIONS, *options,
                                  *extra, "-o", cubin, src], capture_output=True, text=True)
            size = os.path.getsize(cubin) if run.returncode == 0 else run.stderr[-300:]
            print(f"{name}: {' '.join(extra) or 'as before'}: rc {run.returncode} {time.time() - start:.1f} s {size}",
                  flush=True)


if __name__ == "__main__":
    main()
