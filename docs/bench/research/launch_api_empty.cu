extern "C" __global__ void empty(const float* a, long long s0, long long s1, const float* b, long long l, float* c,
                                 long long o0, long long o1, int R, int NC, long long K, long long ks, float alpha,
                                 float beta, float* P, unsigned* t, int mode) {
    if (mode == 12345 && threadIdx.x == 0) c[0] = alpha;
}
