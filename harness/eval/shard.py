"""One `make eval` spread over several GPUs of a host (`--gpus N`).

Each GPU gets a child `gdn-harness full` with a share of the workloads (`--shard K/N`) and its own copy of the
results folder; nothing writes the results folder while they run, so no two processes ever write one file.
Afterwards the records each copy added (trace, extras and run lines; reference latencies) are appended to
the results folder. The traces keep the GPU model only, as officially, so the report cannot tell the GPUs
apart; the children's logs say which GPU ran which workloads."""
import argparse
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from harness.data.jsonio import DataError, read_json_object, write_json_atomic, write_text_atomic

REFERENCE_CACHE = "reference_latency.json"


def parse_shard(text):
    """argparse type of --shard: 'K/N' with 0 <= K < N."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K/N (e.g. 0/2), got {text!r}") from None
    if not 0 <= k < n:
        raise argparse.ArgumentTypeError(f"shard {text!r}: need 0 <= K < N")
    return k, n


def shard_workloads(workloads, k, n):
    """Shard k of n, in file order. Shares are balanced greedily (largest first) on a cost of one per
    workload plus its largest axis relative to the largest of all (a pair costs about the same at any size;
    the reference's time grows with total_seq_len or batch_size)."""
    size = [max((v for v in w.axes.values() if isinstance(v, (int, float))), default=1) for w in workloads]
    top = max(size, default=1) or 1
    load, owner = [0.0] * n, {}
    for i in sorted(range(len(workloads)), key=lambda i: (-size[i], i)):
        j = min(range(n), key=lambda j: (load[j], j))
        owner[i] = j
        load[j] += 1.0 + size[i] / top
    return [w for i, w in enumerate(workloads) if owner[i] == k]


def child_argv(argv, shard_dir, k, n, prepare_jobs):
    """The child's arguments: the parent's, less --gpus/--out/--prepare-jobs, plus its own."""
    drop = {"--gpus", "--out", "--prepare-jobs"}
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in drop:
            skip = True
        elif not any(a.startswith(f"{d}=") for d in drop):
            out.append(a)
    return out + ["--out", str(shard_dir), "--shard", f"{k}/{n}", "--no-report", "--prepare-jobs", str(prepare_jobs)]


def _records(folder):
    """The append-only record files of a results folder, relative to it."""
    folder = Path(folder)
    found = [folder / "runs.jsonl", *folder.glob("harness/*.jsonl"), *folder.glob("traces/*/*/*.jsonl")]
    return sorted(p.relative_to(folder) for p in found if p.is_file())


def _lines(path):
    """Complete lines only (a child killed mid-line leaves a partial last one)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return text[: text.rfind("\n") + 1].splitlines(keepends=True)


def merge(out, shard_dirs):
    """Append what each shard folder added to its copy of `out`; returns {relative path: lines added}."""
    out = Path(out)
    base = {rel: _lines(out / rel) for rel in _records(out)}
    merged, added = dict(base), {}
    for shard in map(Path, shard_dirs):   # everything is checked before anything is written
        for rel in _records(shard):
            lines, old = _lines(shard / rel), base.get(rel, [])
            if lines[:len(old)] != old:
                raise RuntimeError(f"{shard / rel} does not start with {out / rel}: it was not copied from it")
            if lines[len(old):]:
                merged[rel] = merged.get(rel, []) + lines[len(old):]
                added[str(rel)] = added.get(str(rel), 0) + len(lines) - len(old)
    cache = {}
    for path in (folder / REFERENCE_CACHE for folder in [out, *map(Path, shard_dirs)]):
        try:
            entries = read_json_object(path, "reference latencies")
        except DataError as exc:
            raise DataError(exc.where, f"{exc.message}; nothing was merged") from None
        for key, value in entries.items():
            cache.setdefault(key, value)
    for rel in added:   # rewritten whole: a partial last line that a killed run left in `out` goes, as in append_jsonl
        write_text_atomic(out / rel, "".join(merged[Path(rel)]))
    if cache:
        write_json_atomic(out / REFERENCE_CACHE, cache)
    return added


def _pump(stream, prefix, log):
    """Copy a child's output to its log and, prefixed, to ours (tqdm's carriage returns become lines)."""
    for chunk in iter(lambda: stream.read1(4096), b""):
        log.write(chunk)
        log.flush()
        for line in chunk.decode(errors="replace").replace("\r", "\n").splitlines():
            if line.strip():
                print(f"{prefix} {line}", flush=True)


def run_sharded(argv, out, n, work_root, prepare_jobs, module="harness"):
    """Run n children (`python -m module`), one per visible GPU, each on its share in a copy of `out` under
    work_root; merge what they wrote into `out` (also when one failed: nothing measured is lost). Returns the
    worst exit status."""
    out, work_root = Path(out), Path(work_root)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = [d.strip() for d in visible.split(",")] if visible else [str(k) for k in range(n)]
    shutil.rmtree(work_root, ignore_errors=True)
    procs = []
    for k in range(n):
        shard_dir = work_root / f"shard{k}"
        if out.exists():
            shutil.copytree(out, shard_dir)
        else:
            shard_dir.mkdir(parents=True)
        cmd = [sys.executable, "-m", module, *child_argv(argv, shard_dir, k, n, prepare_jobs)]
        log = open(work_root / f"shard{k}.log", "wb")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env={**os.environ, "CUDA_VISIBLE_DEVICES": devices[k]})
        pump = threading.Thread(target=_pump, args=(proc.stdout, f"[gpu {devices[k]}]", log), daemon=True)
        pump.start()
        procs.append((proc, pump, log, shard_dir))
        print(f"shard {k}/{n} on GPU {devices[k]}: {shard_dir} (log {log.name})")
    rcs = []
    for proc, pump, log, _ in procs:
        rcs.append(proc.wait())
        pump.join()
        log.close()
    added = merge(out, [shard_dir for *_, shard_dir in procs])
    print(f"merged into {out}: " + (", ".join(f"{rel} +{k}" for rel, k in sorted(added.items())) or "nothing new"))
    for k, rc in enumerate(rcs):
        if rc:
            print(f"shard {k}/{n} exited with status {rc}; see {work_root / f'shard{k}.log'}")
    return max(rcs)
