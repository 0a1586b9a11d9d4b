# Measurement harness only: F64_CLUSTER_BLOCKS from the capacity query of this machine start.
import json, os
path = os.environ.get("KGEN_CAPACITY_JSON", "")
if path and os.path.exists(path):
    try:
        import kgen.ops.tensorcore as tc
        if hasattr(tc, "F64_CLUSTER_BLOCKS"):
            table = {}
            for r in json.load(open(path))["rows"]:
                b = min(r[e]["blocks"] for e in ("kgen_tc_matmul", "kgen_tc_matmul_elem"))
                d = table.setdefault(r["min_blocks"], {})
                d[r["split"]] = min(d.get(r["split"], b), b)
            tc.F64_CLUSTER_BLOCKS.update(table)
    except Exception as exc:  # noqa
        print("sitecustomize:", exc)
