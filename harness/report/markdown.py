"""Markdown tables for the reports."""
import math


def md_table(df, floatfmt=".3f"):
    """df as a Markdown table: floats in floatfmt, a NaN as '-'."""
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            cells.append(format(v, floatfmt) if isinstance(v, float) and math.isfinite(v) else
                         ("-" if isinstance(v, float) else str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
