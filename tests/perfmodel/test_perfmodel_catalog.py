import subprocess
import sys

import pytest

from scalestudy.measure.metrics import flops_per_token
from scalestudy.spec import catalog
from scalestudy.spec.catalog import peak_flops
from scalestudy.spec.catalog.gpus import UnknownDeviceError
from scalestudy.spec.catalog.models import parameter_counts

USER = """
models:
  my-3b: {n_layers: 26, dim: 3072, n_heads: 24, n_kv_heads: 8, ffn_dim: 8192, vocab_size: 128256, source: mine}
gpus:
  My GPU 9000:
    product: GPU 9000
    aliases: [gpu9000]
    peak_tflops: {bf16: 1234}
    memory_gib: 100
    hbm_gb_per_s: 5000
    intra_node_link_gb_per_s: 400
    power_cap_w: 800
    datasheet: my vendor
"""


def test_published_shapes_have_their_published_sizes(fresh_catalog):
    # Llama 3.1 model cards: 8.03B, 70.6B, 405B; Narayanan et al. 2021 Table 1: 1.7B, 145.6B, 1008B
    for name, billions, tol in (
        ("llama3.1-8b", 8.03, 0.001),
        ("llama3.1-70b", 70.55, 0.001),
        ("llama3.1-405b", 405.85, 0.001),
        ("gpt-1.7b", 1.7, 0.04),
        ("gpt-145b", 145.6, 0.001),
        ("gpt-1t", 1008.0, 0.001),
    ):
        assert parameter_counts(catalog.model(name))["n_params"] / 1e9 == pytest.approx(billions, rel=tol)
    gpt = catalog.model("gpt-7.5b")
    # a tied head is no extra parameter but still a matrix product per token
    assert parameter_counts(gpt)["n_params"] == parameter_counts(gpt)["n_params_non_embedding"] + 51200 * 4096
    assert (
        flops_per_token(gpt, 2048)["flops_per_token"]
        == 6 * (parameter_counts(gpt)["n_params_non_embedding"] + 51200 * 4096) + 12 * 36 * 4096 * 2048
    )
    assert catalog.gpu("h100-sxm").power_cap_w == 700 and catalog.gpu("NVIDIA A100-SXM4-80GB").power_cap_w == 400
    assert catalog.gpu("h100-sxm-96gb-500w").power_cap_w == 500


def test_user_file_adds_models_and_gpus_everywhere(fresh_catalog, tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text(USER)
    with pytest.raises(KeyError, match="my-3b"):
        catalog.model("my-3b")
    catalog.add_catalog_file(f)
    assert catalog.model("my-3b").n_kv_heads == 8 and catalog.model("my-3b").mlp == "swiglu"
    info = peak_flops("gpu9000", "bf16")
    assert info.peak_flops_per_s == 1234e12 and info.device_name == "My GPU 9000"
    with pytest.raises(UnknownDeviceError, match="fp16"):
        peak_flops("My GPU 9000", "fp16")


def test_env_var_files_are_read_and_names_cannot_be_redefined(fresh_catalog, tmp_path, monkeypatch):
    f = tmp_path / "mine.yaml"
    f.write_text(USER)
    monkeypatch.setenv(catalog.ENV_VAR, str(f))
    assert catalog.model("my-3b").dim == 3072 and str(f) in catalog.files()
    dup = tmp_path / "dup.yaml"
    dup.write_text("models:\n  llama2-7b: {n_layers: 1, dim: 8, n_heads: 1, ffn_dim: 8, vocab_size: 8, source: x}\n")
    with pytest.raises(catalog.CatalogError) as e:
        catalog.add_catalog_file(dup)
    assert "llama2-7b" in str(e.value) and "models.yaml" in str(e.value) and str(dup) in str(e.value)
    alias = tmp_path / "alias.yaml"
    alias.write_text(
        USER.split("gpus:")[1].join(["gpus:", ""]).replace("My GPU 9000", "Other").replace("[gpu9000]", "[h200]")
    )
    with pytest.raises(catalog.CatalogError, match="'h200'"):
        catalog.add_catalog_file(alias)


def test_bad_files_name_the_field(fresh_catalog, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  m: {n_layers: 0, dim: 10, n_heads: 3, ffn_dim: 8, vocab_size: 8, mlp: relu}\n")
    with pytest.raises(catalog.CatalogError) as e:
        catalog.add_catalog_file(bad)
    msg = str(e.value)
    assert "models/m/n_layers" in msg and "models/m/mlp" in msg and "'source' is a required property" in msg
    shape = tmp_path / "shape.yaml"
    shape.write_text("models:\n  m: {n_layers: 2, dim: 10, n_heads: 3, ffn_dim: 8, vocab_size: 8, source: x}\n")
    with pytest.raises(catalog.CatalogError, match="n_heads must divide dim"):
        catalog.add_catalog_file(shape)
    with pytest.raises(catalog.CatalogError, match="does not exist"):
        catalog.add_catalog_file(tmp_path / "missing.yaml")


def test_catalog_is_pure_data():
    code = "import sys, scalestudy.spec.catalog as c; c.models(); c.gpus(); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
