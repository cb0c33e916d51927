"""Reaching a Ray cluster (--ray): the optional dependency, the connection (a local instance or an address), and
how many actors it can hold. Ray is imported only here and in the actor, only when --ray is given."""
import os
from dataclasses import dataclass

from harness import REPO
from harness.data.jsonio import DataError

LOCAL = "local"   # --ray without an address: a new instance on this host (ray.init's own name for it)
INSTALL_HINT = "install it with `pip install '.[ray]'` (or `pip install ray`) in the harness's environment"


@dataclass(frozen=True)
class RayOptions:
    address: str = LOCAL        # LOCAL, 'auto' (the cluster `ray start` made here) or host:port
    actors: int | None = None   # None: one per GPU of the cluster (CUDA), 1 on the CPU
    grace_s: float = 60.0       # beyond the pair's own limit before an actor that has not answered counts as hung
    start_s: float = 300.0      # an actor not ready this long after it was asked for stops the run


def require_ray():
    """Ray, or a DataError that says how to get it (exit 2)."""
    try:
        import ray
    except ImportError:
        raise DataError("--ray", "Ray is not installed", INSTALL_HINT) from None
    return ray


def connect(options):
    """Ray, connected as `options` asks. A process that is connected already (a test's instance, or an earlier
    definition of this run) stays so, unless it is connected to another address than the one named."""
    ray = require_ray()
    if ray.is_initialized():
        here = ray.get_runtime_context().gcs_address
        if options.address not in (LOCAL, "auto") and options.address.removeprefix("ray://") != here:
            raise DataError("--ray", f"this process is connected to the Ray cluster at {here}, not {options.address}")
        return ray
    # Actors import the harness from this checkout (the same path on every host of the cluster).
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    try:
        ray.init(address=options.address, include_dashboard=False if options.address == LOCAL else None,
                 logging_level="ERROR", configure_logging=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
    except ConnectionError as exc:
        raise DataError("--ray", f"no Ray cluster at {options.address}: {exc}",
                        "start one with `ray start --head` (or pass --ray alone for a local instance)") from None
    return ray


def actor_env():
    """The environment an actor runs its children in, as a local run's: Ray starts workers at niceness 15
    (RAY_worker_niceness: below everything else on the host, where host-bound timed calls compete), and sets
    OMP_NUM_THREADS=1 where the driver has none, which the actor undoes (PairActor.__init__)."""
    env = {"RAY_worker_niceness": "0"}
    if "OMP_NUM_THREADS" in os.environ:
        env["OMP_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]
    return env


def actor_count(ray, options, device):
    """How many actors to start: one per GPU of the cluster by default; refused beyond what it holds."""
    kind = "GPU" if device.startswith("cuda") else "CPU"
    have = int(ray.cluster_resources().get(kind, 0))
    want = options.actors or (have if kind == "GPU" else 1)
    if want < 1 or want > have:
        raise DataError("--ray-actors", f"{want or 'one per GPU'} actor(s) need as many {kind}s; the Ray cluster has "
                        f"{have}", "pass --ray-actors N within what the cluster has")
    return want
