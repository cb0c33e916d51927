"""`gdn-harness tune` (a GPU): our launch tables derived again on the GPU at hand. Every candidate config is checked
against the reference on a workload and timed there with the official timer (cold L2, the definition's
warmup/iterations/trials), in rounds whose order rotates so drift hits every candidate alike.
- Decode: per batch size (its first workload), the 24 configs of the tuned parameters; the fastest per batch size,
  merged where neighbours agree. A device copy of the state is timed beside them: the bytes the kernel must move.
- Prefill: every workload, the configs of the shipped table's rows; each row (its T and N bounds kept: the kernel
  knows no more on the host) takes the config with the lowest mean over the workloads it covers, among those
  correct on all of them.
  Before any timing, processes launch every candidate once on every workload, so that Triton compiles their builds
  (each config specialised to each workload's sizes: a few hundred) side by side into its on-disk cache.
- Either way a config that beat the shipped one takes its place only if it beats it again in CONFIRM_ROUNDS more
  rounds of the two alone (times_again).
Each table goes into the submission's tuned_tables.json under this GPU's name, which the kernel reads
(launch_table.table_for). The shipped configs are among the candidates, so the printed ratios compare the two from
the same run."""
import concurrent.futures
import functools
import hashlib
import json
import multiprocessing
import statistics
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from harness.build.folder_import import import_from_folder
from harness.data.jsonio import DataError, write_json_atomic
from harness.eval.correctness import Tolerance, check_output
from harness.eval.inputs import allocate_outputs, load_blobs, materialize
from harness.eval.options import default_prepare_jobs
from harness.eval.reference import load_reference, run_reference
from harness.eval.state_copy import copy_latency_ms
from harness.eval.timing import measure
from harness.progress import progress

DECODE = "gdn_decode_qk4_v8_d128_k_last"
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
ROUNDS = 2
CONFIRM_ROUNDS = 4


def load_package(folder, entry):
    """Module `entry` of the submission folder, imported in place (tune writes into it), under a package name that is
    the same in every process."""
    digest = hashlib.sha256(str(Path(folder).resolve()).encode()).hexdigest()[:12]
    return import_from_folder(folder, entry, f"_tune_{digest}")


def candidates(lt):
    """Every config of the decode kernel's tuned parameters: rows per CTA, warps, load hint, block order. One warp won
    every row on the H200; 4 warps are searched because a 4-warp public entry led at B = 16 on an H100."""
    return [lt.DecodeConfig(BV=bv, num_warps=w, load_evict=ev, vb_fast=vf)
            for bv in (4, 8, 16) for w in (1, 4) for ev in ("evict_first", "") for vf in (False, True)]


def _official_ms(fn, args, timing, device):
    """Official latency (ms) of fn(*args): the mean over trials of each trial's median."""
    return statistics.mean(measure(fn, args, timing, device).median_ms
                           for _ in range(timing.trials))


def _time_one(launch, cfg, args, timing, device):
    """Official latency (ms) of one config."""
    return _official_ms(lambda *a: launch(*a, cfg=cfg), args, timing, device)


def _inputs(dataset, definition, workload, device):
    """The workload's inputs on `device`, from its blobs (stand-ins written where missing), seed 0, trial 0."""
    return materialize(definition, workload, load_blobs(dataset, definition, workload), device, 0, 0)


def copy_floor(definition, dataset, workload, timing, device):
    """Official latency (ms) of a device copy of the workload's state into new_state: the bytes the decode kernel
    must move (the rest is a few KiB), timed as the candidates are, cold L2 included."""
    return copy_latency_ms(definition, workload, _inputs(dataset, definition, workload, device), timing, device)


def timed_configs(launch, definition, dataset, workload, timing, device, configs):
    """{config: latency ms} of `launch(*inputs, *outputs, cfg=config)` on one workload, each config correct against
    the reference first (a wrong one is left out: it must never be picked)."""
    inputs = _inputs(dataset, definition, workload, device)
    refs = run_reference(load_reference(definition), definition, inputs)
    correct = []
    for cfg in configs:
        outs = allocate_outputs(definition, workload, device)
        launch(*inputs, *outs, cfg=cfg)
        if all(check_output(n, o, r, Tolerance()).status is None for n, o, r in zip(definition.outputs, outs, refs)):
            correct.append(cfg)
    times = {cfg: [] for cfg in correct}
    outs = allocate_outputs(definition, workload, device)
    for r in range(ROUNDS if correct else 0):
        k = r % len(correct)
        for cfg in correct[k:] + correct[:k]:
            times[cfg].append(_time_one(launch, cfg, [*inputs, *outs], timing, device))
    return {cfg: statistics.mean(t) for cfg, t in times.items()}


def times_again(launch, definition, dataset, workloads, timing, device, pair):
    """The means (ms) of pair = (challenger, shipped) over `workloads`, timed afresh in CONFIRM_ROUNDS rounds that
    alternate the two. A tune's pick is the fastest of several noisy means, so its lead is biased upward (on the H200
    a prefill row's 5 % lead did not hold in two later runs); times taken after the pick carry no such bias."""
    ms = {cfg: [] for cfg in pair}
    for w in workloads:
        args = [*_inputs(dataset, definition, w, device), *allocate_outputs(definition, w, device)]
        for r in range(CONFIRM_ROUNDS):
            for cfg in (pair if r % 2 else pair[::-1]):
                ms[cfg].append(_time_one(launch, cfg, args, timing, device))
    return statistics.mean(ms[pair[0]]), statistics.mean(ms[pair[1]])


def confirmed_pick(times, shipped, label, again):
    """The fastest config of `times` ({config: ms}), unless it is not the shipped one and again(best, shipped) (their
    means timed afresh) no longer puts it ahead: then the shipped config. Either outcome is printed."""
    best = min(times, key=times.get)
    if best == shipped or shipped not in times:
        return best
    best_ms, shipped_ms = again(best, shipped)
    lead = f"{label}: {best} led the shipped config by {1 - times[best] / times[shipped]:.1%}"
    if best_ms < shipped_ms:
        print(f"{lead}, and by {1 - best_ms / shipped_ms:.1%} in {CONFIRM_ROUNDS} more rounds of the two; kept",
              flush=True)
        return best
    print(f"{lead}, but not in {CONFIRM_ROUNDS} more rounds of the two ({best_ms * 1e3:.3f} against "
          f"{shipped_ms * 1e3:.3f} us); the shipped config kept", flush=True)
    return shipped


def tune_batch(folder, dataset, workload, timing, device, configs=None):
    """The decode kernel's timed_configs on one workload (default: every candidate)."""
    kernel, lt = load_package(folder, "kernel"), load_package(folder, "launch_table")
    return timed_configs(kernel.launch, dataset.definition(DECODE), dataset, workload, timing, device,
                         configs or candidates(lt))


def merge(best):
    """{batch size: config} with each row that repeats the one below it dropped (the table's lookup takes the
    largest listed batch size <= B)."""
    rows, last = {}, None
    for b in sorted(best):
        if best[b] != last:
            rows[b] = last = best[b]
    return rows


def write_tuned(folder, device_name, table):
    """Put `table` (as JSON) into the folder's tuned_tables.json under `device_name` (other GPUs' tables kept)."""
    path = Path(folder) / "tuned_tables.json"
    try:
        tables = json.loads(path.read_text()) if path.exists() else {}
    except ValueError as exc:
        raise DataError(path, f"not JSON ({exc})", "remove it, or fix it by hand") from None
    if not isinstance(tables, dict):
        raise DataError(path, "not a {GPU name: table} object", "remove it, or fix it by hand")
    tables[device_name] = table
    write_json_atomic(path, tables)
    return path


def tune_decode(folder, dataset, timing, device, device_name, configs=None):
    """Tune every batch size of the decode workloads (the first workload of each); write the table. Returns rows
    [(B, shipped config, its ms, best config, its ms, a copy of the state's ms)] and the file written."""
    kernel, lt = load_package(folder, "kernel"), load_package(folder, "launch_table")
    definition = dataset.definition(DECODE)
    first = {}
    for w in dataset.workloads(definition):
        first.setdefault(w.axes["batch_size"], w)
    rows, best = [], {}
    for b, workload in sorted(first.items()):
        times = tune_batch(folder, dataset, workload, timing, device, configs)
        if not times:
            raise RuntimeError(f"no candidate config is correct at B = {b}")
        shipped = lt.entry(lt.LAUNCH_TABLE, b)
        best[b] = confirmed_pick(times, shipped, f"B={b}", lambda c, s: times_again(
            kernel.launch, definition, dataset, [workload], timing, device, (c, s)))
        copy_ms = copy_floor(definition, dataset, workload, timing, device)
        rows.append((b, shipped, times.get(shipped), best[b], times[best[b]], copy_ms))
        print(f"B={b}: shipped {shipped} {_us(times.get(shipped))}; best {best[b]} {_us(times[best[b]])}; "
              f"state copy {_us(copy_ms)}", flush=True)
    table = {str(b): asdict(cfg) for b, cfg in sorted(merge(best).items())}
    return rows, write_tuned(folder, device_name, table)


def prefill_candidates(lt):
    """The configs of the shipped prefill table's rows, each once, in row order."""
    return list(dict.fromkeys(row.config for row in lt.LAUNCH_TABLE))


def _build_in_child(folder, root, workload, configs, device):
    """Each config (as JSON fields) launched once on one workload, in a builder process; returns (uuid, [(config
    index, error text)])."""
    from harness.data.dataset import Dataset

    dataset = Dataset(root)
    definition = dataset.definition(PREFILL)
    kernel, lt = load_package(folder, "kernel"), load_package(folder, "launch_table")
    inputs = _inputs(dataset, definition, workload, device)
    errors = []
    for i, fields in enumerate(configs):
        try:
            kernel._launch(kernel.ALGO_CHUNK, *inputs, *allocate_outputs(definition, workload, device),
                           cfg=lt.config_from_json(fields))
        except Exception as exc:  # the timing process meets it again, in context
            errors.append((i, f"{type(exc).__name__}: {exc}"))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return workload.uuid, errors


def build_in_parallel(folder, dataset, workloads, configs, device, jobs):
    """Every config launched once on every workload in `jobs` processes before any timing: Triton compiles the
    builds side by side into its on-disk cache, where this process's first call of each finds it (one after another
    they took most of a prefill tune). Prints what failed (a build not made here is compiled when timing reaches it);
    returns {uuid: [(config, error text)]} of the failures."""
    fields = [asdict(c) for c in configs]
    jobs = max(1, min(jobs, len(workloads)))
    failed = {}
    start = time.monotonic()
    bar = progress(len(workloads), f"building {len(configs)} configs x {len(workloads)} workloads ({jobs} processes)",
                   "workload")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_build_in_child, str(folder), dataset.root, w, fields, device) for w in workloads]
        for w, fut in zip(workloads, futures):
            try:
                uuid, errors = fut.result()
            except Exception as exc:  # a builder process died (its pool then fails every later task): said here
                failed[w.uuid] = [(c, f"{type(exc).__name__}: {exc}") for c in configs]
                print(f"building on workload {w.uuid}: its builder process failed ({type(exc).__name__}: {exc}); "
                      "its builds compile when timing reaches them")
                bar.update(1)
                continue
            for i, error in errors:
                failed.setdefault(uuid, []).append((configs[i], error))
                print(f"building {configs[i]} on workload {uuid} failed ({error}); timing meets it again")
            bar.update(1)
    bar.close()
    print(f"built in {time.monotonic() - start:.0f} s", flush=True)
    return failed


def tune_prefill(folder, dataset, timing, device, device_name, configs=None, workloads=None):
    """Tune every row of the prefill table over the workloads it takes (default: all of them); a row no workload
    reaches keeps its config. Returns rows [(row, shipped config's mean ms or None, best config, its mean ms,
    workloads)] and the file written."""
    kernel, lt = load_package(folder, "kernel"), load_package(folder, "launch_table")
    definition = dataset.definition(PREFILL)
    launch = functools.partial(kernel._launch, kernel.ALGO_CHUNK)
    configs = configs or prefill_candidates(lt)
    workloads = workloads or dataset.workloads(definition)
    if device.startswith("cuda"):   # the interpreter builds nothing
        build_in_parallel(folder, dataset, workloads, configs, device, default_prepare_jobs())
    found, members = {}, {}   # row index -> [{config: ms} per workload], [its workloads]
    for w in workloads:
        i = lt.LAUNCH_TABLE.index(lt.row_of(w.axes["total_seq_len"], w.axes["num_seqs"]))
        members.setdefault(i, []).append(w)
        found.setdefault(i, []).append(timed_configs(launch, definition, dataset, w, timing, device, configs))
        print(f"T={w.axes['total_seq_len']} N={w.axes['num_seqs']}: row {i}, {len(found[i][-1])} of {len(configs)} "
              "configs correct", flush=True)
    rows, table = [], []
    for i, row in enumerate(lt.LAUNCH_TABLE):
        if i not in found:
            table.append(row)
            continue
        ok = [c for c in configs if all(c in t for t in found[i])]
        if not ok:
            raise RuntimeError(f"no candidate config is correct on every workload of row {i} ({row})")
        mean = {c: statistics.mean(t[c] for t in found[i]) for c in ok}
        best = confirmed_pick(mean, row.config, f"row {i}", lambda c, s: times_again(
            launch, definition, dataset, members[i], timing, device, (c, s)))
        rows.append((row, mean.get(row.config), best, mean[best], len(found[i])))
        table.append(replace(row, config=best))
    return rows, write_tuned(folder, device_name, [[r.max_t, r.max_n, asdict(r.config)] for r in table])


def _us(ms):
    return "not correct here" if ms is None else f"{ms * 1e3:.3f} us"


def device_name_of(device):
    return torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
