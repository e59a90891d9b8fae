"""Colours a figure can tell apart: perceptual distance (CIEDE2000 in CIELAB) and the palettes
built with it.

- `categorical(base, n)`: `base` (the colour-blind palette) and past its end each next colour the
  one farthest from every colour before it, so that no two series of a figure are nearly alike (an
  evenly spaced hue circle puts neighbours of 30 degrees side by side: two olive, three pink lines);
- `shades(bases, sizes)`: a hue family per group (a GPU kind): the group's base colour, then each
  next shade the farthest one within the base's hue sector; shades of one group may be closer than
  MIN_DISTANCE, so a figure gives the series of one group a marker each (drawing.group_styles);
- `distance`: ΔE00 between two colours, `lab`: CIELAB of colours.

Deterministic: a fixed grid of candidates, ties to the first; the same figure gets the same colours.
"""

from __future__ import annotations

import functools
from typing import Sequence

RGB = tuple[float, float, float]

# ΔE00 below which two colours of one figure are too close to tell two series apart by colour alone:
# the colour-blind palette's own closest pair (its orange and its light brown, 11.6)
MIN_DISTANCE = 11.5
# the candidates: CIELAB lightness from 30 (dark, not black) to 78 (light, still a line on white),
# chroma at least 30 (no grey: grey is the other strategies tried, drawing.MUTED)
LIGHTNESS, MIN_CHROMA = (30.0, 78.0), 30.0
# a group's shades: hue within SECTOR_DEG degrees of its base colour's, lightness within SHADE_LIGHTNESS of
# its, chroma at least SHADE_CHROMA of its (a dull dark olive reads as no shade of orange)
SECTOR_DEG, SHADE_LIGHTNESS, SHADE_CHROMA = 25.0, 25.0, 0.6

_SRGB_TO_XYZ = (
    (0.4124564, 0.3575761, 0.1804375),
    (0.2126729, 0.7151522, 0.0721750),
    (0.0193339, 0.1191920, 0.9503041),
)
_WHITE = (0.95047, 1.0, 1.08883)  # D65
_EPS = (6 / 29) ** 3


def lab(colors):
    """CIELAB (D65) of sRGB colours: anything matplotlib reads as a colour, or rows of RGB in [0, 1];
    an array of shape (n, 3) (or (3,) for one colour)."""
    import numpy as np  # heavy: imported only when drawing
    from matplotlib.colors import to_rgb

    if isinstance(colors, str) or (len(colors) in (3, 4) and all(isinstance(v, (int, float)) for v in colors)):
        return lab([colors])[0]
    rgb = np.array([to_rgb(c) for c in colors], dtype=float).reshape(-1, 3)
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = linear @ np.array(_SRGB_TO_XYZ).T / np.array(_WHITE)
    f = np.where(xyz > _EPS, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=-1)


def _srgb(lab_rows):
    """sRGB of CIELAB rows, unclipped (a value outside [0, 1]: the colour is outside sRGB)."""
    import numpy as np  # heavy: imported only when drawing

    lab_rows = np.asarray(lab_rows, dtype=float)
    fy = (lab_rows[..., 0] + 16) / 116
    f = np.stack([fy + lab_rows[..., 1] / 500, fy, fy - lab_rows[..., 2] / 200], axis=-1)
    xyz = np.where(f > 6 / 29, f**3, 3 * (6 / 29) ** 2 * (f - 4 / 29)) * np.array(_WHITE)
    linear = xyz @ np.linalg.inv(np.array(_SRGB_TO_XYZ)).T
    return np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * np.abs(linear) ** (1 / 2.4) - 0.055)


def delta_e(a, b):
    """CIEDE2000 colour difference between CIELAB arrays (broadcast over their leading axes)."""
    import numpy as np  # heavy: imported only when drawing

    a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    (l1, a1, b1), (l2, a2, b2) = np.moveaxis(a, -1, 0), np.moveaxis(b, -1, 0)
    c_mean = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    g = 0.5 * (1 - np.sqrt(c_mean**7 / (c_mean**7 + 25.0**7)))
    a1, a2 = a1 * (1 + g), a2 * (1 + g)
    c1, c2 = np.hypot(a1, b1), np.hypot(a2, b2)
    h1, h2 = np.degrees(np.arctan2(b1, a1)) % 360, np.degrees(np.arctan2(b2, a2)) % 360
    chromatic = c1 * c2 != 0
    dh = (h2 - h1 + 180) % 360 - 180
    dh_big = 2 * np.sqrt(c1 * c2) * np.sin(np.radians(np.where(chromatic, dh, 0) / 2))
    l_mean, c_mean = (l1 + l2) / 2, (c1 + c2) / 2
    h_sum = h1 + h2
    h_mean = np.where(
        ~chromatic,
        h_sum,
        np.where(np.abs(h1 - h2) <= 180, h_sum / 2, np.where(h_sum < 360, (h_sum + 360) / 2, (h_sum - 360) / 2)),
    )
    t = (
        1
        - 0.17 * np.cos(np.radians(h_mean - 30))
        + 0.24 * np.cos(np.radians(2 * h_mean))
        + 0.32 * np.cos(np.radians(3 * h_mean + 6))
        - 0.20 * np.cos(np.radians(4 * h_mean - 63))
    )
    s_l = 1 + 0.015 * (l_mean - 50) ** 2 / np.sqrt(20 + (l_mean - 50) ** 2)
    s_c, s_h = 1 + 0.045 * c_mean, 1 + 0.015 * c_mean * t
    r_t = (
        -2 * np.sqrt(c_mean**7 / (c_mean**7 + 25.0**7)) * np.sin(np.radians(60 * np.exp(-(((h_mean - 275) / 25) ** 2))))
    )
    dl, dc, dhh = (l2 - l1) / s_l, (c2 - c1) / s_c, dh_big / s_h
    return np.sqrt(dl**2 + dc**2 + dhh**2 + r_t * dc * dhh)


def distance(c1, c2) -> float:
    """ΔE00 between two colours (anything matplotlib reads as a colour)."""
    return float(delta_e(lab(c1), lab(c2)))


def hue_deg(lab_rows):
    import numpy as np  # heavy: imported only when drawing

    lab_rows = np.asarray(lab_rows, dtype=float)
    return np.degrees(np.arctan2(lab_rows[..., 2], lab_rows[..., 1])) % 360


@functools.lru_cache(maxsize=1)
def _candidates():
    """(CIELAB rows, their sRGB) of a grid of colours within sRGB, of LIGHTNESS and MIN_CHROMA."""
    import numpy as np  # heavy: imported only when drawing

    lightness = np.arange(LIGHTNESS[0], LIGHTNESS[1] + 1e-9, 2.5)
    ab = np.arange(-100.0, 100.0 + 1e-9, 4.0)
    grid = np.array(np.meshgrid(lightness, ab, ab, indexing="ij")).reshape(3, -1).T
    grid = grid[np.hypot(grid[:, 1], grid[:, 2]) >= MIN_CHROMA]
    rgb = _srgb(grid)
    inside = np.all((rgb >= 0) & (rgb <= 1), axis=1)
    return grid[inside], np.clip(rgb[inside], 0, 1)


def _rgb(values) -> RGB:
    r, g, b = (float(v) for v in values[:3])
    return r, g, b


def _farthest(chosen, pool) -> int:
    """The index of the pool's colour (CIELAB rows) farthest (ΔE00) from every chosen one."""
    import numpy as np  # heavy: imported only when drawing

    d = np.min(delta_e(pool[:, None, :], np.asarray(chosen)[None, :, :]), axis=1)
    return int(np.argmax(d))


@functools.lru_cache(maxsize=64)
def categorical(base: tuple[RGB, ...], n: int) -> list[RGB]:
    """n colours: `base` first, then each next the candidate farthest from all before it."""
    if n <= len(base):
        return list(base[: max(n, 0)])
    pool, rgb = _candidates()
    chosen = list(lab(list(base)))
    out = list(base)
    while len(out) < n:
        i = _farthest(chosen, pool)
        chosen.append(pool[i])
        out.append(_rgb(rgb[i]))
    return out


@functools.lru_cache(maxsize=64)
def shades(bases: tuple[RGB, ...], sizes: tuple[int, ...]) -> list[list[RGB]]:
    """sizes[g] colours of group g: bases[g] first, then shades of its hue (within SECTOR_DEG of it,
    and nearer to it than to any other group's base; of a lightness and chroma near its: SHADE_LIGHTNESS,
    SHADE_CHROMA), each the farthest from every colour chosen (all groups'), the group with the most
    still to colour first."""
    import numpy as np  # heavy: imported only when drawing

    pool, rgb = _candidates()
    base_lab = lab(list(bases))
    hues = hue_deg(base_lab)

    def apart(h1, h2):
        return np.abs((h1 - h2 + 180) % 360 - 180)

    pool_hue, pool_chroma = hue_deg(pool), np.hypot(pool[:, 1], pool[:, 2])
    sectors = []
    for g, h in enumerate(hues):
        others = [apart(h, o) for k, o in enumerate(hues) if k != g]
        half = min([SECTOR_DEG, *(o / 2 for o in others)])
        near = (
            (apart(pool_hue, h) <= half)
            & (np.abs(pool[:, 0] - base_lab[g, 0]) <= SHADE_LIGHTNESS)
            & (pool_chroma >= SHADE_CHROMA * np.hypot(base_lab[g, 1], base_lab[g, 2]))
        )
        sectors.append(np.flatnonzero(near))
    chosen = list(base_lab)
    out: list[list[RGB]] = [[_rgb(b)] for b in bases]
    while True:
        left = [sizes[g] - len(out[g]) for g in range(len(bases))]
        g = max(range(len(bases)), key=lambda k: left[k])
        if left[g] <= 0:
            break
        mine = sectors[g] if len(sectors[g]) else np.arange(len(pool))
        i = mine[_farthest(chosen, pool[mine])]
        chosen.append(pool[i])
        out[g].append(_rgb(rgb[i]))
    return [o[: sizes[g]] for g, o in enumerate(out)]


def closest_pair(colors: Sequence) -> tuple[float, int, int]:
    """(ΔE00, i, j) of the two closest colours of a list (inf, -1, -1 for fewer than two)."""
    import numpy as np  # heavy: imported only when drawing

    if len(colors) < 2:
        return float("inf"), -1, -1
    c = lab(list(colors))
    d = delta_e(c[:, None, :], c[None, :, :])
    np.fill_diagonal(d, np.inf)
    i, j = np.unravel_index(int(np.argmin(d)), d.shape)
    return float(d[i, j]), int(i), int(j)
