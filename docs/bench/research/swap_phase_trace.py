"""Where the transposed-tile kernel's time goes (TensorMatmul.swap_ab): the rendered source with
%globaltimer reads spliced in at entry, after the barrier set-up, at the first full stage, after
the last k tile, after the epilogue and at exit (lines "TRACE block slice t0 ..." in ns from
entry, for three blocks), and in the cluster merge around its first barrier, the merge itself and
the last barrier ("MERGE block slice ..."). Each traced kernel's result is checked against
float64; "CASE" lines give each spec's device time from a CUDA graph of the untraced kernel.
Run from the repository root on an sm_90 GPU; output on stdout."""
import torch

import kgen
from kgen.core.kernel import _compile_spec
from kgen.ops.tensorcore import TensorMatmul as T, wgmma_ring_stages
from kgen.bench.skinny import time_graph

NOW = 'asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(_T[{i}]) :: "memory");'


def inject(src):
    def rep(a, b, count=1):
        nonlocal src
        assert src.count(a) == count, (a, src.count(a))
        src = src.replace(a, b)
    if "cluster_leave();\n}" in src:
        src = src.replace("(index_t)tile_n * BN);\n    cluster_leave();\n}", "(index_t)tile_n * BN);\n    cluster_sync();\n}").replace("__device__ __forceinline__ void cluster_merge_step", "#define cluster_sync_last cluster_leave\n__device__ __forceinline__ void cluster_merge_step")
        LEAVE = True   # the merge's last barrier is cluster_leave: traced as such below
    else:
        LEAVE = False
    if "cluster_merge_step(unsigned part" in src:
        rep("    cluster_sync();\n    cluster_merge(part, out, M, N, ldo, flags, alpha, beta, (index_t)tile_m * BM, (index_t)tile_n * BN);\n    cluster_sync();\n}",
            "    unsigned long long _a, _b, _c, _d;\n    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(_a) :: \"memory\");\n    cluster_sync();\n"
            "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(_b) :: \"memory\");\n"
            "    cluster_merge(part, out, M, N, ldo, flags, alpha, beta, (index_t)tile_m * BM, (index_t)tile_n * BN);\n"
            "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(_c) :: \"memory\");\n    cluster_sync();\n"
            "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(_d) :: \"memory\");\n"
            "    if (threadIdx.x == 0 && (blockIdx.x == 0 || blockIdx.x == gridDim.x - 1)) printf(\"MERGE %d %d %llu %llu %llu\\n\", blockIdx.x, blockIdx.z, _b - _a, _c - _b, _d - _c);\n}")
    if LEAVE:
        rep("    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(_c) :: \"memory\");\n    cluster_sync();\n",
            "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(_c) :: \"memory\");\n    cluster_leave();\n")
    rep("    extern __shared__ __align__(1024) unsigned char smem_raw[];\n",
        "    extern __shared__ __align__(1024) unsigned char smem_raw[];\n    unsigned long long _T[6] = {0,0,0,0,0,0};\n    " + NOW.format(i=0) + "\n")
    rep("        asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\");\n    }\n",
        "        asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\");\n    }\n    " + NOW.format(i=1) + "\n")
    rep("            mbar_wait(bars + 8 * s, (f / STAGES) & 1);\n",
        "            mbar_wait(bars + 8 * s, (f / STAGES) & 1);\n            if (it == 0) { " + NOW.format(i=2) + " }\n")
    rep("        wgmma_wait<0>();\n        // The unit's last stage",
        "        wgmma_wait<0>();\n        " + NOW.format(i=3) + "\n        // The unit's last stage")
    start = src.index("{", src.index("kgen_tc_wgmma("))
    depth, i = 0, start
    while True:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        if depth == 0:
            break
        i += 1
    body = src[start:i]
    merge = "    cluster_merge_step(base, out, M, N, ldo, flags, alpha, beta, u0 % tiles);\n"
    if body.endswith(merge):
        body = body[:-len(merge)] + "    " + NOW.format(i=4) + "\n" + merge
    else:
        body = body + "    " + NOW.format(i=4) + "\n"
    body += ("    " + NOW.format(i=5) + "\n    if (threadIdx.x == 0 && (blockIdx.x == 0 || blockIdx.x == gridDim.x - 1 || blockIdx.x == gridDim.x / 2))\n"
             '        printf("TRACE %d %d %llu %llu %llu %llu %llu %llu\\n", blockIdx.x, blockIdx.z, _T[0], _T[1] - _T[0], _T[2] - _T[0], _T[3] - _T[0], _T[4] - _T[0], _T[5] - _T[0]);\n')
    src = src[:start] + body + src[i:]
    return src


def traced(spec):
    src = inject(kgen.render(spec))
    return spec.kernel_class(spec, src, _compile_spec(spec, src, "sm_90"))


cases = []
for M, N, K in ((27, 4096, 1472), (16, 4096, 4096), (40, 4096, 4096)):
    base = T.default_spec({"M": M, "N": N, "K": K}, "bfloat16").replace(layout_b="col")
    cases.append((M, N, K, "default", base))
    if M > 16:
        rows16 = T(dtype="bfloat16", tile=(16, 64, 64), warp_tile=(16, 64), stages=wgmma_ring_stages(16, 64, 1),
                   instruction="wgmma", swap_ab=True, layout_b="col")
        cases.append((M, N, K, "rows16 unsplit", rows16))
        if base.split_merge == "cluster":
            cases.append((M, N, K, "unsplit", base.replace(split_k=1, split_merge="workspace")))
for M, N, K, name, spec in cases:
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    B = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
    C = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    plain = kgen.build(spec)
    us = time_graph(torch, [lambda: plain(A, B, out=C)] * 20, 15)
    ref = A.double() @ B.double()
    k = traced(spec)
    for rep in range(3):
        C.fill_(float("nan"))
        k(A, B, out=C)
        torch.cuda.synchronize()
    err = float((C.double() - ref).norm() / ref.norm())
    print(f"CASE {M}x{N}x{K} {name} tile {spec.tile} split {spec.split_k} {spec.split_merge} stages {spec.stages} graph_us {us:.2f} err {err:.1e}", flush=True)
