"""What the report plots share: log axes show only finite values above 0, and matplotlib refuses to draw a log axis
that has none (a definition where every pair failed has no latency at all), so each plot keeps to the series with a
value to show and says so where no series has one, instead of failing the report."""
import textwrap

import numpy as np
import pandas as pd


def loggable(values):
    """Boolean array: which of `values` a log axis can show (finite and above 0)."""
    v = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        return np.isfinite(v) & (v > 0)


def on_log_axis(values):
    """`values` as floats, NaN (a gap in the line) where a log axis cannot show them; None where none can."""
    v = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)
    keep = loggable(v)
    return np.where(keep, v, np.nan) if keep.any() else None


def nothing_to_plot(ax, why, **labels):
    """An axis left without data: the reason written in it, on linear scales, with its labels and title."""
    ax.set(xticks=[], yticks=[], **labels)
    ax.text(0.5, 0.5, textwrap.fill(why, 48), ha="center", va="center", transform=ax.transAxes, color="dimgray")


def finish(ax, **grid):
    """The legend (where a series was drawn) and the grid."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3, **grid)
