"""Where ptxas puts a kernel's global loads in its inner loop. Renders a spec (JSON, as `kgen
render` takes it), compiles it with kgen's nvcc options for sm_90a, disassembles ENTRY with
cuobjdump, and for the loops that hold tensor-core instructions prints their size, an opcode
count and a map of the body: L = LDG, H = HMMA or HGMMA, S = LDS, B = BRA, . = anything else.
A loop whose body starts with arithmetic on the window it is about to multiply and only then
issues its LDGs waits for that window before asking for the next (matmul.md, "The next window's
loads and the current window's wait"). No GPU needed; cuobjdump comes with the CUDA toolkit or
the nvidia-cuda-cuobjdump wheel.

    python docs/bench/research/sass_ring_map.py SPEC.json kgen_skinny_tc_dot_v4 [ARCH]"""
import collections
import os
import re
import subprocess
import sys
import tempfile

import kgen
from kgen.core.compiler import BASE_OPTIONS, find_nvcc
from kgen.cli.common import load_spec

LINE = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")
BRANCH = re.compile(r"BRA.*?0x([0-9a-f]+)")
PREDICATE = re.compile(r"^@!?U?P\w+\s+")


def opcode(text: str) -> str:
    return PREDICATE.sub("", text).split()[0]


def sass(spec_file: str, entry: str, arch: str) -> list[tuple[int, str]]:
    work = tempfile.mkdtemp()
    src, cubin = os.path.join(work, "k.cu"), os.path.join(work, "k.cubin")
    with open(src, "w") as f:
        f.write(kgen.render(load_spec(spec_file)))
    subprocess.run([find_nvcc(), *BASE_OPTIONS, "-cubin", f"-gencode=arch=compute_{arch},code=sm_{arch}",
                    "-o", cubin, src], check=True, capture_output=True)
    text = subprocess.run(["cuobjdump", "-sass", "-fun", entry, cubin], check=True, capture_output=True,
                          text=True).stdout
    return [(int(m.group(1), 16), m.group(2).strip()) for m in map(LINE.match, text.splitlines()) if m]


def main():
    spec_file, entry = sys.argv[1], sys.argv[2]
    arch = sys.argv[3] if len(sys.argv) > 3 else "90a"
    code = sass(spec_file, entry, arch)
    loops = []
    for address, text in code:
        m = BRANCH.search(text)
        if m and int(m.group(1), 16) < address:
            loops.append((int(m.group(1), 16), address))
    symbol = {"LDG": "L", "HMMA": "H", "HGMMA": "H", "LDS": "S", "BRA": "B"}
    for start, end in sorted(loops, key=lambda loop: loop[1] - loop[0]):
        body = [text for address, text in code if start <= address <= end]
        ops = [opcode(text) for text in body]
        if not any(op.startswith(("HMMA", "HGMMA")) for op in ops):
            continue
        counts = collections.Counter(op.split(".")[0] for op in ops)
        print(f"loop {start:#x}-{end:#x}: {len(body)} instructions, {dict(counts.most_common(10))}")
        row = "".join(symbol.get(op.split(".")[0], ".") for op in ops)
        for i in range(0, len(row), 100):
            print("  " + row[i:i + 100])


if __name__ == "__main__":
    main()
