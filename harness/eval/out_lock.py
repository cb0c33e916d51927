"""One run at a time writes traces into an output folder: two at once would each trace the same pairs (resume reads
the folder only when a run starts), and FlashInfer-Bench reads every line of a trace file."""
import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

from harness.data.jsonio import DataError

LOCK_NAME = ".gdn-harness.lock"


@contextmanager
def writing_into(out_dir):
    """Hold <out_dir>/.gdn-harness.lock (an exclusive flock, which the system drops with the process however it
    ends) while the block runs; DataError at once if another run holds it."""
    path = Path(out_dir) / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 100).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise DataError(out_dir, f"another gdn-harness run is writing traces into this folder ({holder})",
                        "wait for it to end, or give another --out") from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}".encode())
        yield
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)
