"""What one evaluation pass is asked to do (EvalOptions), and the deliberate differences from the official evaluator
that a pass prints at its start."""
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.dist.cluster import RayOptions
from harness.eval import environment
from harness.eval.child import TimingConfig
from harness.eval.correctness import Tolerance
from harness.eval.give_up import GiveUpRule


DEVIATIONS = [
    "inputs: the official GDN blobs are not public; missing blobs are replaced by seeded stand-ins "
    "(every trace's environment.libs.inputs says which)",
    "random inputs use a recorded seed (--seed) and are drawn in fp32, then cast; the official harness sets none "
    "and draws in the input's dtype",
    "reference outputs are computed once per workload when every input comes from a blob or a scalar "
    "(the trials are then identical by construction); the official harness recomputes them per trial",
    "environment.libs carries extra provenance keys (python, flashinfer, numpy, harness, timer, inputs, "
    "input_digest, solution_digest, eval_settings, sm_count, compute_capability, driver; officially torch, triton "
    "and cuda)",
    "DPS outputs are filled with NaN before each correctness call (torch.empty otherwise), so a solution that "
    "never writes them cannot pass on leftover memory",
    "after timing, one more call on perturbed inputs written into the same tensors checks for memoized "
    "outputs (on a GPU, two more check for host syncs); a warning, a failure with --strict. These calls run within "
    "the pair's --timeout, so a crash or a hang in them makes the pair RUNTIME_ERROR or TIMEOUT although its "
    "official calls passed",
    "inputs are copied before the first correctness call and outputs right after each one, on the device, to warn "
    "of modified inputs and of work left running (officially no copies)",
    "workloads are checked before any pair: an input or axis the definition does not have, or one it has that the "
    "workload lacks, stops the run naming it (officially a missing input is drawn at random, a missing axis or an "
    "unknown input naming a blob skips the workload, other unknown ones are ignored); a violated definition "
    "constraint stops the run when that workload is reached (officially never evaluated)",
    "a trace's log ends with the harness's reason for an INCORRECT_* status and its warnings as "
    "'[harness warning]' lines (officially no reason is logged)",
    "mechanics that change no figure: traces are appended as each pair ends (officially when a definition's run "
    "returns); a python solution's build module is named fib_sol_<hash> and written once; a child past its deadline "
    "is killed at once (officially joined for 2 s, then terminated); children get their inputs from a payload file "
    "(FlashInfer-Bench's runners pass them as CUDA IPC handles or over a pipe); the timing settings are chosen by the "
    "definition's name containing 'decode' or 'prefill' (the contest's flag named the definition)",
]


OFFICIAL_TIMEOUT_S = 300.0

PAYLOAD_CACHE_NOTE = ("reference outputs are reused from an earlier run with the same definition, workload, input "
                      "bytes, seed, GPU model and torch version (the payload cache); the official harness recomputes "
                      "them every run")


def print_differences(*runs):
    """The deliberate differences from the official evaluator that apply to a run (the options of each of its
    definitions), printed once at its start."""
    notes = []
    for opts in runs:
        notes += [n for n in differences(opts) if n not in notes]
    print("deliberate differences from the official evaluator:")
    for note in notes:
        print(f"  - {note}")


def differences(opts):
    timing = opts.timing
    notes = list(DEVIATIONS)
    if opts.tolerance != Tolerance():
        t, official = opts.tolerance, Tolerance()
        notes.append(f"correctness uses atol {t.atol:g}, rtol {t.rtol:g} and a required matched ratio of "
                     f"{t.required_matched_ratio:g} (--atol/--rtol/--required-matched-ratio; officially "
                     f"{official.atol:g}, {official.rtol:g} and {official.required_matched_ratio:g})")
    if opts.device.startswith("cuda"):
        notes.append(f"this run times on {environment.hardware(opts.device)} with flashinfer "
                     f"{environment.package_version('flashinfer-python') or 'not installed'}; the contest "
                     "timed on a B200 (sm_100a) with locked clocks, FlashInfer and FlashInfer-Bench built from their "
                     "main branches")
    if opts.device.startswith("cuda") and opts.official and timing and timing != opts.official:
        notes.append(f"solutions are timed with {timing.warmup} warmup, {timing.iters} timed call(s) per trial and "
                     f"{timing.trials} trial(s) (--warmup/--iterations/--trials; officially {opts.official.warmup}/"
                     f"{opts.official.iters}/{opts.official.trials})")
    if opts.device.startswith("cuda") and not opts.ray and torch.cuda.device_count() > 1:
        notes.append(f"{torch.cuda.device_count()} GPUs are visible and this run uses one; FlashInfer-Bench would "
                     "time the reference on each and spread every workload's solutions over them round-robin, each "
                     "solution's speedup taken against its own GPU's reference (CUDA_VISIBLE_DEVICES=0 runs both "
                     "alike; --ray runs one actor per GPU)")
    if opts.device.startswith("cuda"):
        notes.append("after a solution's timed trials, as many calls again as they timed run back to back on the "
                     "last trial's tensors, timed with CUDA events (the host-inclusive time reported beside the "
                     "official one); they come after every official call. Should they raise, the pair keeps its "
                     "official status, with a warning")
        if opts.timer != "events":
            notes.append("the official CUPTI timer is required: without it the run stops, and FlashInfer falling back "
                         "to CUDA events inside a call is RUNTIME_ERROR (officially a silent fall-back, a warning "
                         "in the child's log)")
        else:
            notes.append("latencies are CUDA-event times (--timer events), NOT the official CUPTI span: speedups and "
                         "scores are not comparable with official figures")
    if opts.device.startswith("cuda") and not opts.profile_baseline:
        notes.append("the reference is not timed (--no-profile-baseline): traces carry a reference latency and a "
                     "speedup of 0, as FlashInfer-Bench writes them when it does not profile; the contest timed it")
    if opts.payload_cache:
        notes.append(f"{PAYLOAD_CACHE_NOTE}: {opts.payload_cache}")
    if opts.isolation == "worker":
        notes.append("each solution runs in one persistent child (restarted after a crash), not a fresh process per "
                     "pair; --isolation process for the official mode. Its module state (globals, caches, buffers) "
                     "lasts from one workload to the next; its --timeout runs from the job's send, not from a "
                     "child's start, and there is no 30 s start limit. Every pair runs, where FlashInfer-Bench's "
                     "own persistent runner skips a solution for the rest of the run after one COMPILE_ERROR or "
                     "TIMEOUT, or three RUNTIME_ERROR, INCORRECT_SHAPE or INCORRECT_DTYPE with no PASSED between")
    if opts.isolation == "none":
        notes.append("--isolation none: solutions run in this process, with no timeout (a hang never becomes "
                     "TIMEOUT, a crash ends the run); officially a fresh child per pair. For debugging")
    if opts.isolation == "process" and opts.prestart:
        notes.append(f"{opts.prestart} spare children start beside the timed calls (the official runner starts one "
                     "child per pair, after the previous one ends); a spare's --timeout runs from its pair's start, "
                     "not from its own start")
    if opts.isolation in ("process", "worker"):
        notes.append("a child that crashes or times out leaves its log (the first 5 MiB) in its trace, and a crash's "
                     "message gives the exit code; the official runner's log holds only 'Worker process failed "
                     "unexpectedly' or the timeout message (the child's log stays in /tmp)")
    if opts.timeout != OFFICIAL_TIMEOUT_S:
        notes.append(f"a pair times out after {opts.timeout:g} s (--timeout; officially {OFFICIAL_TIMEOUT_S:g} s)")
    if opts.give_up:
        notes += opts.give_up.differences()
    if opts.ray:
        notes.append("--ray: pairs run side by side, one at a time per Ray actor (one per GPU), each actor in its own "
                     "children; FlashInfer-Bench runs one pair at a time per GPU of one host, spreading each "
                     "workload's solutions over them round-robin and timing the reference on each. This process makes "
                     "the inputs and reference outputs" + (" and times the reference, beside the actors' timed calls"
                                                           if opts.profile_baseline else ""))
    if opts.state_copy:
        notes.append("--state-copy: a device copy of each workload's state into new_state is timed in this process "
                     "with the solutions' settings" + (", beside the actors' timed calls" if opts.ray else "") +
                     "; the official evaluator times no such thing (the figure goes to the harness extras only)")
    if opts.reference_timing and opts.profile_baseline:
        notes.append("the prefill reference is timed with 1 trial of 1 iteration and no warmup (its Python loop is "
                     "slow); --reference-timing official times it as the solutions")
    if opts.profile_baseline and opts.device.startswith("cuda"):
        notes.append("reference latencies are cached (same GPU model, workload, input bytes, timer and settings) and "
                     "reused by later runs, and the reference is timed on fresh device copies of a trial's inputs; "
                     "officially it is timed every run, on the tensors that produced its outputs")
    if not opts.device.startswith("cuda"):
        notes.append("CPU device: a correctness check; latencies are wall-clock and NOT official, so no speedups "
                     "or scores are shown" + ("" if opts.profile_baseline else ", and the reference is not timed"))
        if timing is not None:
            notes.append(f"CPU device: {timing.warmup} warmup, {timing.iters} timed call(s) per trial, "
                         f"{timing.trials} trial(s) (pass --warmup/--iterations/--trials for more)")
    return notes


@dataclass
class EvalOptions:
    device: str = "cpu"
    out_dir: Path = Path("results/local")
    timeout: float = OFFICIAL_TIMEOUT_S
    tolerance: Tolerance = Tolerance()
    timing: TimingConfig | None = None          # None: the official settings per definition
    official: TimingConfig | None = None        # the definition's official settings (for the printed difference)
    reference_timing: TimingConfig | None = None
    profile_baseline: bool = True
    resume: bool = False
    seed: int = 0
    isolation: str = "process"
    timer: str = "auto"
    synthesize: bool = True
    show_progress: bool = True
    strict: bool = False
    prestart: int | None = None                 # --isolation process: spare children started ahead (None/0: none,
                                                # one child per pair as officially; N > 0 is a printed difference)
    reference_cache: Path | None = None         # reference latency cache file (None: .cache/)
    reference_budget_s: float | None = None     # stop timing uncached references after this many seconds
    payload_cache: Path | None = None           # keep inputs + reference outputs here for later runs (None: off)
    prepare_jobs: int = 1                       # processes preparing payloads before the loop (1: in the loop)
    ray: RayOptions | None = None               # run the pairs on Ray actors (None: this host's children)
    give_up: GiveUpRule | None = None           # when to stop running a too-slow solution (None: never)
    state_copy: bool = False                    # also time new_state.copy_(state) per workload (state_copy.py)


def default_prepare_jobs():
    """Half the cores, at most 8 (each preparer holds a CUDA context and a copy of the inputs)."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))
