# Writes the 64-k window variants of templates/skinny.cu.j2 measured in ab3 (before Skinny.tc_window
# existed): python window64_template.py SRC DST RING  (RING 3 = "win3", 2 = "win2").
import sys
src, dst, ring = sys.argv[1], sys.argv[2], sys.argv[3]
s = open(src).read()
def rep(old, new, count=1):
    global s
    assert s.count(old) == count, (old, s.count(old))
    s = s.replace(old, new)
rep("#define TC_DOT_RING {{ tc_dot_ring }}", "#define TC_DOT_RING " + ring)
rep("template <bool DOT, bool WG>\n__device__ __forceinline__ void stage_tc(", "#define TC_WIN 64   // k a window of the dot form: 8 * TC_WG a lane\n#define TC_WG (TC_WIN / 32)\ntemplate <bool DOT, bool WG>\n__device__ __forceinline__ void stage_tc(")
# staging: whole TC_WIN windows for the mma.sync dot form
rep("const int groups = DOT || WG ? (klen + 31) / 32 * 4 : (klen + 7) / 8;",
    "constexpr int G = DOT && !WG ? TC_WG : 1;\n    const int groups = DOT || WG ? (klen + 32 * G - 1) / (32 * G) * 4 * G : (klen + 7) / 8;")
rep("const int step = DOT ? (grp >> 2) * 4 + q : grp;\n                const int t = DOT ? (grp & 3) : q;",
    "const int step = DOT ? grp / (4 * G) * 4 * G + (grp % G) * 4 + q : grp;\n                const int t = DOT ? grp % (4 * G) / G : q;")
# window
rep("__device__ __forceinline__ void tc_dot_window(const float4 (&v)[TC_TILES][2][2], const float4* frag, int lane,",
    "__device__ __forceinline__ void tc_dot_window(const float4 (&v)[TC_TILES][2][2 * TC_WG], const float4* frag, int lane,")
i = s.index("void tc_dot_window(")
j = s.index("for (int s = 0; s < 4; ++s) {", i)
s = s[:j] + "for (int s = 0; s < 4 * TC_WG; ++s) {" + s[j + len("for (int s = 0; s < 4; ++s) {"):]
# load
rep("__device__ __forceinline__ void tc_dot_load(float4 (&v)[TC_TILES][2][2], const real* const (&colp)[TC_TILES][2], index_t k) {",
    "__device__ __forceinline__ void tc_dot_load(float4 (&v)[TC_TILES][2][2 * TC_WG], const real* const (&colp)[TC_TILES][2], index_t k) {")
rep("            for (int q = 0; q < 2; ++q) v[i][h][q] = ld4<V>(colp[i][h] + k + 4 * q);",
    "            for (int q = 0; q < 2 * TC_WG; ++q) v[i][h][q] = ld4<V>(colp[i][h] + k + 4 * q);")
# form
rep("            colp[i][h] = L + (index_t)min(n0 + C * (16 * i + 8 * h + g), n_last) * ldl + 8 * t;\n            // Held",
    "            colp[i][h] = L + (index_t)min(n0 + C * (16 * i + 8 * h + g), n_last) * ldl + 8 * TC_WG * t;\n            // Held")
rep("acc[i][j][2 * h + q] = fmaf(sv, colp[i][h][k - 8 * t], acc[i][j][2 * h + q]);",
    "acc[i][j][2 * h + q] = fmaf(sv, colp[i][h][k - 8 * TC_WG * t], acc[i][j][2 * h + q]);")
rep("        float4 w[TC_DOT_RING][TC_TILES][2][2];", "        float4 w[TC_DOT_RING][TC_TILES][2][2 * TC_WG];")
rep("            if (32 * (r + 1) <= klen) tc_dot_load<V>(w[r], colp, kc + 32 * r);",
    "            if (TC_WIN * (r + 1) <= klen) tc_dot_load<V>(w[r], colp, kc + TC_WIN * r);")
i = s.index("stage_tc<true, false>(S, s_rs, s_ks, r0, o.R, kc, klen, frag, svec);")
j = s.index("flush_tiles(acc, sum, false);\n    // sum[i][j]", i)
body = s[i:j]
body = body.replace("while (base + 32 <= klen)", "while (base + TC_WIN <= klen)")
body = body.replace("if (base + 32 <= klen) {", "if (base + TC_WIN <= klen) {")
body = body.replace("if (base + 32 * TC_DOT_RING <= klen)", "if (base + TC_WIN * TC_DOT_RING <= klen)")
body = body.replace("kc + base + 32 * (TC_DOT_RING - 1));", "kc + base + TC_WIN * (TC_DOT_RING - 1));")
body = body.replace("base += 32;", "base += TC_WIN;")
body = body.replace("float4 (&v)[TC_TILES][2][2] = w[0];", "float4 (&v)[TC_TILES][2][2 * TC_WG] = w[0];")
body = body.replace("for (int q = 0; q < 2; ++q) {\n                        float e[4];", "for (int q = 0; q < 2 * TC_WG; ++q) {\n                        float e[4];")
body = body.replace("const int k = base + 8 * t + 4 * q + c;", "const int k = base + 8 * TC_WG * t + 4 * q + c;")
s = s[:i] + body + s[j:]
open(dst, "w").write(s)
