"""docker-compose.yaml, checked without a Docker engine: it parses, validates against the Compose JSON
schema (tests/data/compose_spec.json, from the docker-compose 1.29.2 wheel), and has the structure
`docker compose up --wait` and the apache/hive image need. Nothing here starts a container."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yaml"
ONE_SHOT = {"create-bucket", "jdbc-driver"}
# The schema declares draft 2019-09 under a URI jsonschema does not recognise; name the draft.
VALIDATOR = jsonschema.Draft201909Validator


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def test_validates_against_the_compose_schema(compose):
    schema = json.loads((ROOT / "tests" / "data" / "compose_spec.json").read_text())
    errors = sorted(VALIDATOR(schema).iter_errors(compose), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_schema_check_catches_a_broken_file(compose):
    """The validation above is not vacuous: a misspelt key is rejected."""
    schema = json.loads((ROOT / "tests" / "data" / "compose_spec.json").read_text())
    broken = json.loads(json.dumps(compose))
    broken["services"]["postgres"]["helthcheck"] = broken["services"]["postgres"].pop("healthcheck")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema, cls=VALIDATOR)


def test_every_service_has_a_pinned_image(services):
    assert set(services) == {"postgres", "minio", "create-bucket", "jdbc-driver", "metastore"}
    for name, svc in services.items():
        image = svc.get("image", "")
        assert re.match(r"^[\w./-]+:[\w.-]+$", image) and not image.endswith(":latest"), (name, image)
    assert re.match(r"^apache/hive:4\.\d+\.\d+$", services["metastore"]["image"])


def test_long_running_services_have_healthchecks_and_one_shots_do_not_restart(services):
    for name, svc in services.items():
        if name in ONE_SHOT:
            assert svc.get("restart") == "no", name
            assert "healthcheck" not in svc, name
        else:
            hc = svc.get("healthcheck")
            assert hc and hc.get("test") and hc["test"][0] in ("CMD", "CMD-SHELL"), name
            assert hc.get("retries", 0) >= 3, name
            assert svc.get("restart") == "unless-stopped", name


def test_depends_on_references_existing_services_with_consistent_conditions(services):
    adopted = set()
    for name, svc in services.items():
        for dep, spec in (svc.get("depends_on") or {}).items():
            assert dep in services and dep != name, (name, dep)
            condition = spec["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in services[dep], (name, dep)
            elif condition == "service_completed_successfully":
                assert dep in ONE_SHOT, (name, dep)
                if name not in ONE_SHOT:
                    adopted.add(dep)
            else:
                assert condition == "service_started", (name, dep, condition)
    # `docker compose up --wait` exits non-zero when a one-shot container nothing long-running waits
    # for has exited (docker/compose#10596): every one-shot must be adopted.
    assert adopted == ONE_SHOT
    assert services["metastore"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_published_ports_bind_loopback_only(services):
    published = []
    for name, svc in services.items():
        for port in svc.get("ports", []):
            assert isinstance(port, str) and port.startswith("127.0.0.1:"), (name, port)
            published.append(port.split(":")[1])
    assert sorted(published) == ["5432", "9000", "9001", "9083"]


def test_named_volumes_are_declared_and_bind_mounts_exist(compose, services):
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, svc in services.items():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), (name, source)
            else:
                used.add(source)
    assert used == declared == {"postgres-data", "minio-data", "hive-auxlib"}


def test_metastore_environment_has_what_the_apache_hive_image_needs(services):
    env = services["metastore"]["environment"]
    assert env["SERVICE_NAME"] == "metastore"
    assert env["DB_DRIVER"] == "postgres"
    opts = dict(re.findall(r"-D([\w.]+)=(\S+)", env["SERVICE_OPTS"]))
    pg = services["postgres"]["environment"]
    assert opts["javax.jdo.option.ConnectionDriverName"] == "org.postgresql.Driver"
    assert opts["javax.jdo.option.ConnectionURL"] == f"jdbc:postgresql://postgres:5432/{pg['POSTGRES_DB']}"
    assert opts["javax.jdo.option.ConnectionUserName"] == pg["POSTGRES_USER"]
    assert opts["javax.jdo.option.ConnectionPassword"] == pg["POSTGRES_PASSWORD"]
    # The driver reaches $HIVE_HOME/auxlib (on every hive service's classpath, schematool included).
    assert "hive-auxlib:/opt/hive/auxlib:ro" in services["metastore"]["volumes"]
    assert "hive-auxlib:/auxlib" in services["jdbc-driver"]["volumes"]
    assert "/auxlib/postgresql.jar" in services["jdbc-driver"]["command"][0]
    # Resolved by Maven coordinates, not downloaded from an address written into the file.
    assert "dependency:copy" in services["jdbc-driver"]["command"][0]
    assert "org.postgresql:postgresql:" in services["jdbc-driver"]["environment"]["POSTGRES_JDBC_ARTIFACT"]
    assert not re.search(r"https?://[^ ]+\.jar", Path("docker-compose.yaml").read_text())
    assert env["HIVE_CUSTOM_CONF_DIR"] == "/hive_custom_conf"
    assert "./docker/hive:/hive_custom_conf:ro" in services["metastore"]["volumes"]
    assert "hadoop-aws" in env["HIVE_AUX_JARS_PATH"] and "aws-java-sdk-bundle" in env["HIVE_AUX_JARS_PATH"]


def _properties(path: Path) -> dict[str, str]:
    root = ET.parse(path).getroot()
    return {p.findtext("name"): p.findtext("value") for p in root.findall("property")}


def test_metastore_site_turns_lock_housekeeping_on(services):
    props = _properties(ROOT / "docker" / "hive" / "metastore-site.xml")
    for key in ("metastore.housekeeping.threads.on", "metastore.compactor.initiator.on",
                "hive.compactor.initiator.on"):
        assert props[key] == "true", key
    for key in ("metastore.txn.timeout", "hive.txn.timeout"):
        assert re.fullmatch(r"\d+s", props[key]), key
    assert props["metastore.warehouse.dir"].startswith("s3a://warehouse/")


def test_s3a_points_at_the_minio_service_and_its_bucket(services):
    core = _properties(ROOT / "docker" / "hive" / "core-site.xml")
    minio = services["minio"]["environment"]
    assert core["fs.s3a.endpoint"] == "http://minio:9000"
    assert core["fs.s3a.path.style.access"] == "true"
    assert (core["fs.s3a.access.key"], core["fs.s3a.secret.key"]) == (minio["MINIO_ROOT_USER"],
                                                                       minio["MINIO_ROOT_PASSWORD"])
    assert "mb --ignore-existing local/warehouse" in services["create-bucket"]["command"][0]


def test_postgres_creates_the_journal_database():
    sql = (ROOT / "docker" / "postgres" / "init-journal.sql").read_text()
    assert re.search(r"CREATE DATABASE tableswap\b", sql)
