"""A workload's payload: its trial inputs and reference outputs (and a perturbed set for the memoization check),
made once, kept in a file the children read, and cached across runs when asked."""
import hashlib
import json
import os
import time
from pathlib import Path

import torch

from harness.eval import environment
from harness.eval.child import official_timing
from harness.eval.inputs import BlobFault, check_constraints, load_blobs, materialize
from harness.eval.reference import BAD_BLOB, ReferenceFailed, load_reference, run_reference
from harness.progress import progress


def _digest(files):
    h = hashlib.sha256()
    for p in files:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


PAYLOAD_VERSION = 1  # bump when what a payload holds, or how, changes


def payload_key(definition, workload, digest, opts, trials):
    """What a payload depends on: the definition (its reference), the workload, the input bytes, seed,
    trial count, GPU model and torch version."""
    parts = [definition.to_json(), workload.to_json(), digest, opts.seed, trials, environment.hardware(opts.device),
             torch.__version__, PAYLOAD_VERSION]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def payload_path(cache_dir, definition, workload, digest, opts, trials):
    key = payload_key(definition, workload, digest, opts, trials)
    return Path(cache_dir) / f"{definition.name}-{workload.uuid}-{key}.pt"


def blobs_and_provenance(dataset, definition, workload, opts):
    """The workload's blobs and where its inputs come from. A blob that cannot give its inputs fails the
    workload's baseline (ReferenceFailed): officially that workload is skipped and the others run."""
    try:
        blobs = load_blobs(dataset, definition, workload, synthesize=opts.synthesize)
    except BlobFault as exc:
        raise ReferenceFailed(str(exc), BAD_BLOB) from exc
    provenance = {"inputs": "stand-in" if blobs.standin else ("real" if blobs.files else "random"),
                  "digest": _digest(blobs.files) if blobs.files else f"seed{opts.seed}"}
    return blobs, provenance


def prepare_workload(dataset, definition, workload, opts, cache_dir):
    """Trial inputs (CPU copies) and reference outputs, written to (or found in) `cache_dir`; returns
    (payload path, provenance dict, ref fn, inputs). ReferenceFailed: the workload's baseline cannot be built (a
    blob that cannot give its inputs, a reference that raises or whose result does not fit the outputs)."""
    blobs, provenance = blobs_and_provenance(dataset, definition, workload, opts)
    timing = opts.timing or official_timing(definition.name)
    random = any(s.type == "random" for s in workload.inputs.values())
    ref = load_reference(definition)
    path = payload_path(cache_dir, definition, workload, provenance["digest"], opts, timing.trials)
    if path.exists():
        try:
            trials_in = torch.load(path, map_location="cpu", weights_only=False)["inputs"]
            return path, provenance, ref, trials_in
        except Exception:  # a damaged entry is recomputed
            path.unlink(missing_ok=True)
    trials_in, trials_out = [], []
    for t in range(timing.trials):
        if t and not random:
            trials_in.append(trials_in[0])
            trials_out.append(trials_out[0])
            continue
        inputs = materialize(definition, workload, blobs, opts.device, t, opts.seed)
        if t == 0:
            check_constraints(definition, workload, inputs, f"workload {workload.uuid}")
        with torch.no_grad():
            outs = run_reference(ref, definition, inputs)
        trials_in.append([x.cpu() if isinstance(x, torch.Tensor) else x for x in inputs])
        trials_out.append([o.cpu() for o in outs])
    fresh_in = perturb(trials_in[0], opts.seed)
    with torch.no_grad():
        fresh_out = run_reference(ref, definition, [x.to(opts.device) if isinstance(x, torch.Tensor) else x
                                                    for x in fresh_in])
    payload = {"inputs": trials_in, "outputs": trials_out,
               "fresh": {"inputs": fresh_in, "outputs": [o.cpu() for o in fresh_out]}}
    # whole or absent: written aside, then renamed (a parallel preparer may write the same entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return path, provenance, ref, trials_in


def _prepare_in_child(root, definition_name, workload, opts, cache_dir):
    """One payload, in a preparer process; returns (uuid, seconds, error text or None)."""
    from harness.data.dataset import Dataset

    start = time.monotonic()
    try:
        dataset = Dataset(root)
        prepare_workload(dataset, dataset.definition(definition_name), workload, opts, cache_dir)
        return workload.uuid, time.monotonic() - start, None
    except ReferenceFailed:   # the serial pass meets it again and skips the workload, saying why
        return workload.uuid, time.monotonic() - start, None
    except Exception as exc:  # the serial pass meets it again and reports it in context
        return workload.uuid, time.monotonic() - start, f"{type(exc).__name__}: {exc}"


def prepare_in_parallel(dataset, definition, workloads, opts, cache_dir):
    """Inputs and reference outputs of `workloads` in `opts.prepare_jobs` processes at once, before any
    timing starts (the reference is a host-bound loop of small launches: the GPU has room for several, and
    nothing is being timed yet). Returns {uuid: seconds that workload took in its process}."""
    import concurrent.futures
    import multiprocessing

    jobs = min(opts.prepare_jobs, len(workloads))
    seconds = {}
    bar = progress(len(workloads), f"{definition.name}: preparing ({jobs} processes)", "workload",
                   disable=not opts.show_progress)
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_prepare_in_child, dataset.root, definition.name, w, opts, cache_dir)
                   for w in workloads]
        for fut in concurrent.futures.as_completed(futures):
            uuid, secs, error = fut.result()
            seconds[uuid] = secs
            if error:
                print(f"{definition.name}: preparing {uuid} failed in its process ({error}); it is retried in order")
            bar.update(1)
    bar.close()
    return seconds


def perturb(inputs, seed):
    """Inputs a solution has not seen: floating tensors scaled elementwise by 1 + 0.05 N(0, 1) (shapes,
    dtypes, integer tensors such as cu_seqlens and scalars kept), for the memoization check."""
    gen = torch.Generator().manual_seed(seed + 7919)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            noise = torch.randn(x.shape, generator=gen, dtype=torch.float32)
            x = (x.float() * (1 + 0.05 * noise)).to(x.dtype)
        out.append(x)
    return out
