"""What no page or figure of the book shows: TeX typed as plain text, a figure number
not named as the paper's (issue 49), a count of one with a plural noun (issue 41). One
rule for the figures
(:func:`markovlib.companion.figures.style.pseudo_tex`), the pages' sources (the unit
tests) and the browser check of the built pages, which reads this file alone (no
import of markovlib, whose torch costs each browser process about 5 s)."""

from __future__ import annotations

import re

# "H_rate", "π_1", "θ_π", "s_2", "x_n", "2^16": a figure writes them in mathtext
# ($H_{\mathrm{rate}}$), a page in MyST maths; not a name's part (ff.W_1)
PSEUDO_TEX = re.compile(
    r"H_rate|(?<![A-Za-z0-9_.])[A-Za-zπθ]_(?:\d|\{|π|rate|n(?![A-Za-z]))"
    r"|(?<![A-Za-z0-9_.])\d+\^\{?\d"
)

# "Fig N" neither the book's own (a numbered reference or a caption's number) nor
# named as the paper's ("the paper's Fig 3(b)", issue 49)
FIGURE = re.compile(r"\bFigs?\.? ?\d")
NAMED = re.compile(r"paper['’]s $")


def bare_figures(text: str) -> list[str]:
    """Each figure number in ``text`` not named as the paper's, with its context."""
    return [
        text[max(0, m.start() - 40) : m.start() + 12]
        for m in FIGURE.finditer(text)
        if not NAMED.search(text[max(0, m.start() - 8) : m.start()])
    ]


# "1 runs", "1 seeds": a count of one with a plural noun (issue 41); not "11 runs",
# "0.1 runs", "window-1 runs"
PLURAL_AFTER_ONE = re.compile(
    r"(?<![\d.,-])\b1 (runs|seeds|positions|cells|files|chapters|rows|steps|"
    r"iterations|states|layers|heads|ensembles|trainings|values|models)\b"
)


def wrong_plurals(text: str) -> list[str]:
    """Each count of one with a plural noun in ``text``."""
    return [m[0] for m in PLURAL_AFTER_ONE.finditer(text)]
