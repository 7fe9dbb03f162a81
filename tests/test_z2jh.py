"""Past one machine: deploy/z2jh-values.yaml is a valid Zero to JupyterHub configuration, with
the choices `make hub` makes, and deploy/Dockerfile builds from files that exist.

No Kubernetes and no Docker daemon here: the values are validated as Helm validates them
(the user's values merged over the chart's defaults, then the chart's JSON schema), against
copies of the chart's `values.yaml` and `values.schema.yaml` from its release 4.4.0
(deploy/z2jh/README.md names the commit)."""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import jsonschema
import pytest
import yaml

from tools.teaching import classroom

ROOT = Path(__file__).resolve().parents[1]
VALUES = ROOT / "deploy" / "z2jh-values.yaml"
CHART = ROOT / "deploy" / "z2jh"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def coalesce(defaults: dict, given: dict) -> dict:
    """The values Helm renders with: ``given`` merged over the chart's ``defaults``, maps
    merged key by key, anything else replaced, and a key given as null removed (Helm's
    rule for deleting a default)."""
    merged = copy.deepcopy(defaults)
    for key, value in given.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = coalesce(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def problems(values: dict) -> list[str]:
    """Where ``values`` (a user's values file) breaks the chart's schema, one line each."""
    schema = _load(CHART / "values.schema.yaml")
    validator = jsonschema.Draft7Validator(schema)
    merged = coalesce(_load(CHART / "values.yaml"), values)
    return [
        f"{'.'.join(str(p) for p in err.absolute_path) or '(top)'}: {err.message}"
        for err in sorted(validator.iter_errors(merged), key=lambda e: list(e.absolute_path))
    ]


def test_the_values_file_is_valid_for_the_chart() -> None:
    assert problems(_load(VALUES)) == []


@pytest.mark.parametrize(
    ("change", "found"),
    [
        ({"singleuser": {"cpu": {"limt": 1}}}, "singleuser.cpu: Additional properties"),
        ({"singleuser": {"memory": {"limit": [2]}}}, "singleuser.memory.limit: [2] is not"),
        ({"cull": {"timeout": "an hour"}}, "cull.timeout: 'an hour' is not of type"),
        ({"singleuser": {"defaultURL": "/lab"}}, "singleuser: Additional properties"),
    ],
)
def test_the_schema_check_finds_a_mistake(change: dict, found: str) -> None:
    # The check can fail: a typo, a wrong type, a misspelt class name in the file are caught.
    broken = coalesce(_load(VALUES), change)
    assert any(line.startswith(found) for line in problems(broken)), problems(broken)


def test_the_values_make_the_choices_make_hub_makes() -> None:
    values, hub = _load(VALUES), classroom.settings({})
    config, single = values["hub"]["config"], values["singleuser"]
    assert config["JupyterHub"]["authenticator_class"] == "native" == hub.authenticator
    assert config["Authenticator"]["admin_users"] == [hub.teacher]
    # a pod's kernel has no fork server to share PyTorch's import with: what make hub reserves
    # for a student whose kernels each import it
    own = classroom._bytes("", classroom.MEM_PER_STUDENT["own"])
    assert single["memory"] == {"limit": hub.mem_limit, "guarantee": own}
    assert values["cull"]["timeout"] == hub.cull_timeout
    assert values["cull"]["every"] == hub.cull_timeout // 2  # the culler's own default
    # one thread per core a student may use
    threads = str(int(single["cpu"]["limit"]))
    assert single["extraEnv"]["OMP_NUM_THREADS"] == single["extraEnv"]["MKL_NUM_THREADS"] == threads
    # the shared data: mounted read-only where BLITZ_CIFAR10_SUBSET points
    mount = single["storage"]["extraVolumeMounts"][0]
    assert (
        mount["readOnly"]
        and single["storage"]["extraVolumes"][0]["persistentVolumeClaim"]["readOnly"]
    )
    subset = Path(single["extraEnv"]["BLITZ_CIFAR10_SUBSET"])
    assert subset.parent == Path(mount["mountPath"]) and subset.name == classroom.SUBSET_NAME


def test_the_landing_page_is_an_nbgitpuller_link_to_notebook_01() -> None:
    url = urlsplit(_load(VALUES)["singleuser"]["defaultUrl"])
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert url.path == "/git-pull" and set(query) == {"repo", "urlpath", "branch"}
    folder = query["repo"].rstrip("/").removesuffix(".git").rsplit("/", 1)[-1]
    assert query["urlpath"] == f"lab/tree/{folder}/notebooks/01_tensors.ipynb"
    assert (ROOT / "notebooks" / "01_tensors.ipynb").is_file()


def test_the_chart_copy_is_the_release_it_names() -> None:
    # The schema's own header, and the chart defaults' hub image of that release (5.5.0 line).
    note = (CHART / "README.md").read_text(encoding="utf-8")
    assert "4.4.0" in note and "5c5f5df751588a68a7781ead01d0f62e88e2e72f" in note
    schema = _load(CHART / "values.schema.yaml")
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert {"hub", "singleuser", "cull"} <= set(schema["properties"])


def test_the_dockerfile_copies_files_that_exist_and_installs_the_pins() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    sources = [
        src
        for line in re.findall(r"^COPY\s+(.+)$", text, re.M)
        for src in line.split()[:-1]
        if not src.startswith("--")
    ]
    assert sources and all((ROOT / src).exists() for src in sources), sources
    # every package pyproject.toml installs is copied, where it says (pip install /opt/blitz)
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]
    for package in setup["packages"]:
        folder = setup.get("package-dir", {}).get(package, package.replace(".", "/"))
        assert any(folder == s or folder.startswith(s + "/") for s in sources), (package, folder)
    # the environment `make venv` and `make hub` install, from the same pin files
    assert "-r /opt/blitz/requirements.txt -r /opt/blitz/requirements-hub.txt" in text
    # JupyterHub in the image (its jupyterhub-singleuser) is of the chart's hub's major version
    pins = (ROOT / "requirements-hub.txt").read_text(encoding="utf-8")
    assert re.search(r"^jupyterhub==5\.", pins, re.M)
    # nothing the image copies is kept out of the build context by .dockerignore
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert not [s for s in sources if s.split("/")[0] in ignored]
