"""What a figure shows, said once: the `Description` of each figure module is the source of the
report's caption, the figure's title and footnotes and its CSV's quantity names, so that they
cannot disagree. Whether the study's numbers are measured or predicted by the performance model
is part of every one of them (`basis`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scalestudy.spec import evidence as ev

MEASURED_BASIS = (
    "Measured: each point is the mean over the study's seeds with a Student-t 95% confidence "
    "interval (none with one seed); an interval reaching past what the quantity can be (below "
    "zero, above 100%) is drawn truncated there and the CSV's note says so."
)
PREDICTED_BASIS = (
    "PREDICTED by the performance model (scalestudy.perfmodel), not measured: one prediction a "
    "configuration; an error bar is the model's band (its value at every corner of a box of its "
    "uncertain inputs)."
)

IMPORTED_BASIS = (
    "Imported: public raw logs, not runs of this package; each point is the mean over the published "
    "repeated runs of the configuration with a Student-t 95% confidence interval."
)
RANK_SHARE_BASIS = (
    "One rank's share: one rank of the configuration measured alone on one GPU with its communication "
    "faked (one run a configuration); not the whole configuration's step time."
)


def _kind(evidence) -> str:
    """True/False (predicted or not) or a kind of scalestudy.spec.evidence."""
    if evidence is True:
        return ev.PREDICTED
    return evidence if evidence in ev.KINDS else ev.MEASURED


@dataclass(frozen=True)
class Quantity:
    """A plotted quantity: `label` names it in the CSV (x_quantity / y_quantity), on the axis and
    in the caption; `metric` is its column stem in the summary table (times `scale`); values
    outside [low, high] cannot be, and are marked invalid rather than drawn; `log`: drawn on a
    log axis."""

    name: str
    unit: str = ""
    metric: str | None = None
    scale: float = 1.0
    low: float | None = 0.0
    high: float | None = None
    log: bool = False  # drawn on a log axis (it spans orders of magnitude)
    better: str = "high"  # "high" or "low": which end is good; a heatmap picks its colour map from it

    @property
    def label(self) -> str:
        return f"{self.name} ({self.unit})" if self.unit else self.name

    def possible(self, value: float) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


@dataclass(frozen=True)
class Description:
    """One figure in words. `shows` says what is drawn against what, `series` what a line, bar
    group or cell is; `notes` are footnotes that hold for every study; `paper` cites the paper's
    figure or section and `paper_result` the paper's number it is compared with."""

    name: str
    title: str
    paper: str
    shows: str
    series: str
    x: Quantity
    quantities: tuple[Quantity, ...]
    category: str
    notes: tuple[str, ...] = ()
    paper_result: str = ""
    # the paper's own numbers, drawn as labelled reference lines: (quantity label, value, what)
    paper_values: tuple[tuple[str, float, str], ...] = ()
    # a spec field (prepare.config_spec: "hardware", the GPU kind) whose values each take a hue of
    # their own: the series of one value are shades of it with a marker each (drawing.series_colors)
    hue_by: str | None = None
    # each point a configuration a reader looks up, not a sample of a curve: a point lying on another
    # series' point is drawn beside it even where the two lines only cross there (drawing.point_slots)
    every_point: bool = False
    extra: dict = field(default_factory=dict)

    def quantity(self, name: str) -> Quantity:
        for q in self.quantities:
            if q.name == name or q.label == name:
                return q
        raise KeyError(
            f"figure {self.name!r} describes no quantity {name!r}; it has {', '.join(q.label for q in self.quantities)}"
        )

    @staticmethod
    def basis(evidence) -> str:
        """What a number of the figure is (evidence: True/False for predicted or not, or a kind of
        scalestudy.spec.evidence), said in its first footnote."""
        return {ev.PREDICTED: PREDICTED_BASIS, ev.IMPORTED: IMPORTED_BASIS, ev.RANK_SHARE: RANK_SHARE_BASIS}.get(
            _kind(evidence), MEASURED_BASIS
        )

    def heading(self, evidence) -> str:
        """The figure's title as drawn."""
        return f"{self.title} — PREDICTED by the model" if _kind(evidence) == "predicted" else self.title

    def footnotes(self, predicted: bool | str) -> list[str]:
        return [self.basis(predicted), *self.notes]

    def caption(
        self, *, predicted: bool | str, study: str = "", hardware: str = "", runs: str = "", command: str = ""
    ) -> str:
        """The report's caption (reStructuredText): the same title, basis and notes as the figure."""
        parts = [
            f"**{self.heading(predicted)}** ({self.paper}). {self.shows}; {self.series}.",
            " ".join(self.footnotes(predicted)),
        ]
        if self.paper_result:
            parts.append(f"The paper: {self.paper_result}")
        facts = []
        if study:
            facts.append(f"Study: {study}.")
        if runs:
            facts.append(f"Runs: {runs}.")
        if hardware:
            facts.append(f"Hardware: {hardware}.")
        if facts:
            parts.append(" ".join(facts))
        if command:
            parts.append(f"Rebuild: ``{command}``")
        return "\n\n".join(_rst_safe(p) for p in parts)


def _rst_safe(text: str) -> str:
    # a bare '|' opens a substitution and a leading '-' a list in reStructuredText
    return text.replace("|", "/")
