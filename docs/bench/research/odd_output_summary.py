"""Tables of two trees' odd_output_ab.py runs: for each group of runs, the products by the
parity of the N they ran at (as drawn, or rounded up to a multiple of 8), each product's faster
time of the group's runs per tree, and the geometric means of before / after and of x cuBLAS.
Usage: python odd_output_summary.py DIR BEFORE AFTER SUFFIX[+SUFFIX...] ... [-v]
(reads DIR/odd_output_<BEFORE>_<SUFFIX>.json and DIR/odd_output_<AFTER>_<SUFFIX>.json; -v lists
every product, slowest change last)."""
import json
import math
import sys


def fastest(path_of, suffixes):
    out = {}
    for suffix in suffixes:
        data = json.load(open(path_of(suffix)))
        for row in data["rows"]:
            for kind in ("drawn", "n8"):
                if f"{kind}_us" not in row:
                    continue
                best = out.setdefault((tuple(row["shape"]), kind), [math.inf, math.inf, 0.0])
                best[0] = min(best[0], row[f"{kind}_us"])
                best[1] = min(best[1], row[f"{kind}_cublas_us"])
                best[2] = max(best[2], row[f"{kind}_err"])
        meta = f"{data['device']}, {data['dtype']}, {data['layout']}, seed {data['seed']}"
    return out, meta


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def main(argv):
    verbose = "-v" in argv
    argv = [a for a in argv if a != "-v"]
    root, before, after = argv[:3]
    for group in argv[3:]:
        suffixes = group.split("+")
        b, meta = fastest(lambda s: f"{root}/odd_output_{before}_{s}.json", suffixes)
        a, _ = fastest(lambda s: f"{root}/odd_output_{after}_{s}.json", suffixes)
        print(f"== {meta} ({group})")
        for parity in ("odd", "even"):
            rows = [(k, b[k], a[k]) for k in b
                    if ((k[0][1] if k[1] == "drawn" else -(-k[0][1] // 8) * 8) % 2 == 1) == (parity == "odd")]
            if not rows:
                continue
            speed = [x[0] / y[0] for _, x, y in rows]
            x_before = [x[1] / x[0] for _, x, _ in rows]
            x_after = [y[1] / y[0] for _, _, y in rows]
            print(f"  {parity} N: {len(rows)} products, {before} / {after} {geomean(speed):.3f}x "
                  f"({min(speed):.3f}-{max(speed):.3f}x); x cuBLAS {geomean(x_before):.3f}"
                  f" -> {geomean(x_after):.3f} (lowest {min(x_after):.3f});"
                  f" largest error {max(max(x[2], y[2]) for _, x, y in rows):.2e}")
            if verbose:
                for (shape, kind), x, y in sorted(rows, key=lambda r: r[1][0] / r[2][0]):
                    print(f"    {'x'.join(map(str, shape))} {kind}: {x[0]:.1f} -> {y[0]:.1f} µs (cuBLAS {y[1]:.1f})")


if __name__ == "__main__":
    main(sys.argv[1:])
