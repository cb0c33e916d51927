"""Scratch folders in the system's temp folder named after the process that owns them (<prefix><pid>-<random>), so
that a later process removes those a killed one left: a run or Ray actor ended by SIGKILL cannot clean up itself."""
import os
import shutil
import tempfile
from pathlib import Path


def own_scratch(prefix):
    """A new folder of this process, after removing the folders of this prefix whose process is gone."""
    clear_dead(prefix)
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-")


def clear_dead(prefix):
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = folder.name[len(prefix):].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # another user's process
        pass
    return True
