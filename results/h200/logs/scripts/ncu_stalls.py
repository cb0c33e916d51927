# Summarise an Nsight Compute source-page export (`ncu --import R.ncu-rep --page source --csv --print-source sass`):
# per kernel, the warp-stall samples by reason, the share of samples by how often an instruction ran (once per warp
# = prologue / epilogue; once per warp per chunk step = the chain loop), and the hottest SASS instructions.
# Usage: python3 ncu_stalls.py <export.csv[.gz]> [top]
import collections, csv, gzip, sys


def kernels(path):
    cur, hdr, rows = None, None, []
    for rec in csv.reader((gzip.open if path.endswith(".gz") else open)(path, "rt")):
        if len(rec) >= 2 and rec[0] == "Kernel Name":
            if cur:
                yield cur, hdr, rows
            cur, hdr, rows = rec[1], None, []
        elif hdr is None:
            hdr = rec
        else:
            rows.append(dict(zip(hdr, rec)))
    if cur:
        yield cur, hdr, rows


top = int(sys.argv[2]) if len(sys.argv) > 2 else 20
for name, hdr, rows in kernels(sys.argv[1]):
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    n = lambda r, k: int(r[k] or 0)   # noqa: E731
    total = collections.Counter()
    for r in rows:
        for k in reasons:
            total[k] += n(r, k)
    S = sum(total.values())
    print(f"== {name}: {len(rows)} SASS instructions, {S} samples")
    print("   by reason:", ", ".join(f"{k[6:]} {v / S:.1%}" for k, v in total.most_common(8)))
    by_exec = collections.defaultdict(lambda: [0, 0])
    for r in rows:
        by_exec[n(r, "Instructions Executed")][0] += n(r, "# Samples")
        by_exec[n(r, "Instructions Executed")][1] += 1
    for e, (s, cnt) in sorted(by_exec.items(), key=lambda x: -x[1][0])[:4]:
        print(f"   executed {e:7d} times: {cnt:5d} instructions, {s / S:.1%} of samples")
    for i, r in sorted(enumerate(rows), key=lambda x: -n(x[1], "# Samples"))[:top]:
        best = sorted(((n(r, k), k[6:]) for k in reasons), reverse=True)[:2]
        print(f"   {n(r, '# Samples') / S:5.1%} #{i:<5d} x{n(r, 'Instructions Executed'):<6d} {r['Source'].strip()[:58]:58s} {best}")
