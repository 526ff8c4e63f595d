"""One configuration of the flash plugin against fp32 attention, for
debugging on the GPU machine (a crash leaves the other cases standing):
  python3 dbg_case.py PLUGIN_DIR B T NH KVH HD CAUSAL DOCS"""
import sys

from bench_flash import flash_run, make, random_docs, reference, rel
from flash_ctypes import Flash

d = sys.argv[1]
B, T, NH, KVH, HD, causal, docs = (int(x) for x in sys.argv[2:9])
q, k, v, do = make(B, T, NH, KVH, HD, 11)
doc = random_docs(B, T, 11) if docs else None
ref = reference(q, k, v, do, bool(causal), doc)
got = flash_run(Flash(d), q, k, v, do, bool(causal), doc)
errs = [rel(a, b) for a, b in zip(got, ref)]
print(f"{d} B={B} T={T} NH={NH} KVH={KVH} HD={HD} causal={causal} docs={docs}: out dq dk dv "
      + " ".join(f"{e:.2e}" for e in errs), "ok" if max(errs) < 1e-2 else "FAIL", flush=True)
