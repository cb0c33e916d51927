"""Progress bars: live on a terminal; in a log file (a GPU job), a plain line every 30 s at most."""
import sys

from tqdm import tqdm


class _Lines:
    """tqdm's refreshes as lines of their own: it starts each with a carriage return, which a log file keeps, so the
    file would hold every refresh on one line."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        text = text.replace("\r", "").strip()
        if text:
            self.stream.write(text + "\n")

    def flush(self):
        self.stream.flush()


def progress(total, desc, unit, disable=False):
    """A tqdm bar on stderr, suited to where stderr goes."""
    tty = sys.stderr.isatty()
    return tqdm(total=total, desc=desc, unit=unit, disable=disable, leave=True, mininterval=0.1 if tty else 30.0,
                ascii=not tty, file=sys.stderr if tty else _Lines(sys.stderr))
