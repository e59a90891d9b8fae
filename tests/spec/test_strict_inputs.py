"""Duplicate keys in a study, spec or site file and over-long run ids stop with one sentence."""

import pytest
import yaml
from conftest import REPO

from scalestudy.spec.run import SpecError, load_mapping
from scalestudy.spec.site import SiteError, load_site
from scalestudy.spec.studies import MAX_RUN_ID, StudyError, load_study


def _smoke(tmp_path, text_edit):
    text = (REPO / "workflow" / "studies" / "smoke.yaml").read_text()
    p = tmp_path / "dup.yaml"
    p.write_text(text_edit(text))
    return p


def test_a_study_with_a_key_given_twice_is_refused_naming_file_and_key(tmp_path):
    p = _smoke(tmp_path, lambda t: t + "\nseeds: [0]\n")
    with pytest.raises(StudyError) as e:
        load_study(str(p), REPO)
    assert "dup.yaml" in str(e.value) and "'seeds' twice" in str(e.value)


def test_a_spec_or_site_file_with_a_key_given_twice_is_refused(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text('{"model": "tiny", "model": "llama2-7b"}')
    with pytest.raises(SpecError, match="'model' is given twice"):
        load_mapping(str(spec), "RunSpec")
    yspec = tmp_path / "spec.yaml"
    yspec.write_text("model: tiny\nseed: 1\nmodel: llama2-7b\n")
    with pytest.raises(SpecError, match="'model' twice"):
        load_mapping(str(yspec), "RunSpec")
    site = tmp_path / "site.yaml"
    site.write_text("partition: gpu\nexclusive: true\npartition: cpu\n")
    with pytest.raises(SiteError, match="site.yaml.*'partition' twice"):
        load_site(site)


def test_yaml_merge_keys_still_work():
    from scalestudy.spec import strict_yaml

    assert strict_yaml.load_text("a: &b {x: 1}\nc:\n  <<: *b\n  x: 2\n") == {"a": {"x": 1}, "c": {"x": 2}}
    with pytest.raises(yaml.YAMLError):
        strict_yaml.load_text("a: 1\na: 2\n")


def test_an_over_long_run_id_is_refused_at_planning(tmp_path):
    long_model = "m" * (MAX_RUN_ID - 10)
    cat = tmp_path / "cat.yaml"
    cat.write_text(
        f"models:\n  {long_model}: {{n_layers: 8, dim: 64, n_heads: 4, ffn_dim: 128, vocab_size: 256, "
        "source: a test}\n"
    )
    p = _smoke(tmp_path, lambda t: t.replace("model: tiny", f"model: {long_model}", 1) + f"\ncatalog: [{cat}]\n")
    with pytest.raises(StudyError, match=r"run id .* characters, more than 200"):
        load_study(str(p), REPO)


def test_a_catalog_or_cluster_file_with_a_key_given_twice_is_refused_naming_file_and_line(tmp_path):
    from scalestudy.perfmodel.cluster import ClusterError, load_cluster
    from scalestudy.spec import catalog

    cat = tmp_path / "cat.yaml"
    cat.write_text(
        "models:\n  m1: {n_layers: 8, dim: 64, n_heads: 4, ffn_dim: 128, vocab_size: 256, source: a test}\n"
        "  m1: {n_layers: 4, dim: 64, n_heads: 4, ffn_dim: 128, vocab_size: 256, source: a test}\n"
    )
    try:
        with pytest.raises(catalog.CatalogError, match=r"(?s)cat.yaml.*'m1' twice \(first on line 2\)"):
            catalog.add_catalog_file(cat)
    finally:
        catalog.reset()
    clusters = tmp_path / "workflow" / "clusters"
    clusters.mkdir(parents=True)
    text = (REPO / "workflow" / "clusters" / "a100-paper.yaml").read_text()
    (clusters / "dup.yaml").write_text(text + "gpus_per_node: {value: 4, source: a test}\n")
    with pytest.raises(ClusterError, match=r"(?s)dup.yaml.*'gpus_per_node' twice"):
        load_cluster("dup", tmp_path)
