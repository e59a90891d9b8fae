"""The README's numbers that come from the code say what the code says today: the paper study's
jobs and GPU-hours (`scalestudy study --study paper`, scalestudy.launch.cost), and every picture
it embeds is a file of the repository. When the performance model or the study changes, the
failure names the sentence to write. (The dry run's job count, `snakemake -n --config
study=paper`, is checked beside the dry run itself: tests/launch/test_slurm_launch.py.)"""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def _flat(text: str) -> str:
    return " ".join(text.split())


def paper_cost_sentence(monkeypatch) -> str:
    """The README's sentence on the paper study's cost, from the code."""
    from scalestudy.launch.cost import study_cost
    from scalestudy.spec.site import SITE_ENV, load_site
    from scalestudy.spec.studies import load_study

    monkeypatch.delenv(SITE_ENV, raising=False)  # the repository's slurm/site.yaml, as the README says
    study = load_study("paper", REPO)
    cost = study_cost(study, load_site(root=REPO), root=REPO)
    largest = max(cost.rows, key=lambda r: r.devices)
    assert cost.gpu and cost.expected_h is not None, cost.expected_from
    return (
        f"The paper study is {cost.jobs} jobs ({len(study.runs)} training runs, {len(study.collectives)} "
        f"collectives benchmarks), {largest.jobs} of them on {largest.devices} GPUs: "
        f"**{cost.requested_h:,.0f} GPU-hours at the time limits the jobs ask for, "
        f"about {round(cost.expected_h, -2):,.0f} expected**"
    )


def test_the_readme_states_the_paper_studys_cost_as_the_cli_prints_it(monkeypatch):
    want = paper_cost_sentence(monkeypatch)
    readme = _flat(README.read_text())
    stated = re.search(r"The paper study is [^*]*\*\*[^*]*\*\*", readme)
    assert stated, "README.md: no sentence 'The paper study is N jobs ... **... expected**'"
    assert stated.group(0) == want, (
        f"README.md says\n  {stated.group(0)}\nbut `scalestudy study --study paper` "
        f"computes\n  {want}\nwrite the latter in README.md"
    )


def test_every_picture_the_readme_shows_is_in_the_repository():
    pictures = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", README.read_text())
    assert pictures, "the README shows no picture"
    missing = [p for p in pictures if not (REPO / p).is_file()]
    assert not missing, f"README.md shows pictures that are not files of the repository: {missing}"
