from kgen.bench.calls import random_matmul_shapes
sets = [("float32",12,None,106001,1),("float32",12,(1,16),106002,1),("float32",12,(17,256),106003,1),
        ("bfloat16",12,(1,16),106004,64),("bfloat16",12,(17,256),106005,1),("float16",12,None,106006,1),
        ("float64",12,None,106007,1),("float64",12,(17,256),106008,1)]
out=[]
for d,c,r,s,m in sets:
    for M,N,K in random_matmul_shapes(c,s,r,multiple=m):
        out += [f"{d}:{M}x{N}x{K}:row", f"{d}:{M}x{N}x{K}:col"]
open("shapes.txt","w").write(",".join(out))
print(len(out))
