import io

import numpy as np
from PIL import Image

from scalestudy.analysis.audit import PNG_TOLERANCE_PIXELS, same_png


def _png(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8), "RGBA").save(out, format="png")
    return out.getvalue()


def test_layout_noise_passes_an_edit_does_not():
    base = np.full((60, 80, 4), 255)
    base[20:22, 5:75, :3] = 40  # a line
    noisy = base.copy()
    noisy[22, 5:9, :3] = 254  # a few edge pixels one level off: a line moved by a sub-pt amount
    edited = base.copy()
    edited[30:45, 10:40, :3] = 0  # a block drawn over the image
    a, b, c = _png(base), _png(noisy), _png(edited)
    assert same_png(a, a) and same_png(a, b)
    assert not same_png(a, c)
    assert not same_png(a, _png(base[:, :79]))  # another size
    many = base.copy()
    many.reshape(-1, 4)[: PNG_TOLERANCE_PIXELS + 1, 0] = 250  # too many pixels off, each a little
    assert not same_png(a, _png(many))
    assert not same_png(a, b"not a png")
