"""What a figure shows, said once: the `Description` of each figure module is the source of the
report's caption, the figure's title and footnotes and its CSV's quantity names, so that they
cannot disagree. Whether the study's numbers are measured or predicted by the performance model
is part of every one of them (`basis`)."""

from __future__ import annotations

from dataclasses import dataclass, field

MEASURED_BASIS = ("Measured: each point is the mean over the study's seeds with a Student-t 95% confidence "
                  "interval (none with one seed; for a quantity that cannot be negative the interval is "
                  "computed on the log scale, so it never reaches below zero).")
PREDICTED_BASIS = ("PREDICTED by the performance model (scalestudy.perfmodel), not measured: one prediction a "
                   "configuration; an error bar is the model's uncertainty band, not a spread over seeds.")


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
    extra: dict = field(default_factory=dict)

    def quantity(self, name: str) -> Quantity:
        for q in self.quantities:
            if q.name == name or q.label == name:
                return q
        raise KeyError(f"figure {self.name!r} describes no quantity {name!r}; it has "
                       f"{', '.join(q.label for q in self.quantities)}")

    @staticmethod
    def basis(predicted: bool) -> str:
        return PREDICTED_BASIS if predicted else MEASURED_BASIS

    def heading(self, predicted: bool) -> str:
        """The figure's title as drawn."""
        return f"{self.title} — PREDICTED by the model" if predicted else self.title

    def footnotes(self, predicted: bool) -> list[str]:
        return [self.basis(predicted), *self.notes]

    def caption(self, *, predicted: bool, study: str = "", hardware: str = "", runs: str = "",
                command: str = "") -> str:
        """The report's caption (reStructuredText): the same title, basis and notes as the figure."""
        parts = [f"**{self.heading(predicted)}** ({self.paper}). {self.shows}; {self.series}.",
                 " ".join(self.footnotes(predicted))]
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
