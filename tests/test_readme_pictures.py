"""The README's pictures are the paper-model study's figures as this code draws them: copies the
workflow makes (rule readme_pictures), refused once the analysis code would draw them otherwise
(redraw: snakemake --config study=paper-model, then commit docs/img)."""

from pathlib import Path

from PIL import Image

from scalestudy.measure.code_version import code_version

REPO = Path(__file__).resolve().parents[1]
PICTURES = ("weak_scaling", "kernel_breakdown", "tp_pp_grid", "collectives_bandwidth")


def test_every_readme_picture_is_linked_and_drawn_by_this_code():
    readme = (REPO / "README.md").read_text()
    for name in PICTURES:
        path = REPO / "docs" / "img" / "paper-model" / f"{name}.png"
        assert f"(docs/img/paper-model/{name}.png)" in readme
        with Image.open(path) as im:
            made_by = im.text.get("Software")
        assert made_by == code_version(), (
            f"{path.relative_to(REPO)} was drawn by {made_by}, not by this code "
            f"({code_version()}): snakemake --config study=paper-model"
        )
