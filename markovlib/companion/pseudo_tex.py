"""What no page or figure of the book shows: TeX typed as plain text (issue 49). One
rule for the figures (:func:`markovlib.companion.figures.style.pseudo_tex`) and the
browser check of the built pages, which reads this file alone (no import of
markovlib, whose torch costs each browser process about 5 s)."""

from __future__ import annotations

import re

# "H_rate", "π_1", "θ_π", "s_2", "x_n", "2^16": a figure writes them in mathtext
# ($H_{\mathrm{rate}}$), a page in MyST maths; not a name's part (ff.W_1)
PSEUDO_TEX = re.compile(
    r"H_rate|(?<![A-Za-z0-9_.])[A-Za-zπθ]_(?:\d|\{|π|rate|n(?![A-Za-z]))"
    r"|(?<![A-Za-z0-9_.])\d+\^\{?\d"
)
