"""Make a variant of templates/skinny.cu.j2 whose 16-byte streaming loads carry an L2
prefetch-size hint (ld.global.cs.L2::<SIZE>)."""
import sys
size = sys.argv[1]          # 128B or 256B
src = open("templates/skinny.cu.j2").read()
helpers = "{% raw %}" + f"""
// Streaming loads with an L2 prefetch size hint: a miss fetches the whole aligned {size} span.
template <class T> __device__ __forceinline__ T ldcs_l2(const T* p) {{ return __ldcs(p); }}
__device__ __forceinline__ float4 ldcs_l2(const float4* p) {{
    float4 v; asm("ld.global.cs.L2::{size}.v4.f32 {{%0, %1, %2, %3}}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p)); return v; }}
__device__ __forceinline__ uint4 ldcs_l2(const uint4* p) {{
    uint4 v; asm("ld.global.cs.L2::{size}.v4.u32 {{%0, %1, %2, %3}}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)); return v; }}
__device__ __forceinline__ double2 ldcs_l2(const double2* p) {{
    double2 v; asm("ld.global.cs.L2::{size}.v2.f64 {{%0, %1}}, [%2];" : "=d"(v.x), "=d"(v.y) : "l"(p)); return v; }}
""" + "{% endraw %}\n"
anchor = "template <int V> struct RawOf;"
assert src.count(anchor) == 1
src = src.replace(anchor, helpers + anchor)
n = src.count("__ldcs(")
src = src.replace("__ldcs(", "ldcs_l2(").replace("{ return ldcs_l2(p); }", "{ return __ldcs(p); }")
print(n, file=sys.stderr)
sys.stdout.write(src)
