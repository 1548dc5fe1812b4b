"""Reading a drawn figure back from its matplotlib artists (tests of what a figure shows)."""
from __future__ import annotations

from typing import Any

import matplotlib.colors as mcolors


def drawn_colours(fig: Any) -> dict[str, str]:
    """A forest plot's y tick labels -> the colour (hex) of the thick interval drawn at each label's height."""
    ax = fig.axes[0]
    labels = {round(float(y), 6): text.get_text() for y, text in zip(ax.get_yticks(), ax.get_yticklabels())}
    colours = {}
    for line in ax.get_lines():
        ys = line.get_ydata()
        if line.get_linewidth() == 2 and len(ys) == 2 and ys[0] == ys[1] and round(float(ys[0]), 6) in labels:
            colours[labels[round(float(ys[0]), 6)]] = mcolors.to_hex(line.get_color())
    return colours
