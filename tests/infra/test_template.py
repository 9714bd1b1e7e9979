"""The deployment artefacts: the SAM template (linted and transformed offline) and the image."""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

from core.platform.db import connect
from core.platform.migrate import discover
from tests.support.lambdas import FakeContext, invoke
from tests.support.settings import TEST_SECRET_KEY

INFRA = Path(__file__).resolve().parents[2] / "infra"


class _NoManagedPolicies:
    def load(self) -> dict[str, str]:
        return {}


@pytest.fixture(scope="module")
def transformed() -> dict[str, Any]:
    import os

    os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")
    template = yaml_parse((INFRA / "template.yaml").read_text())
    result: dict[str, Any] = transform(template, {"ImageUri": "img"}, _NoManagedPolicies())
    return result


def _of_type(resources: dict[str, Any], kind: str) -> dict[str, Any]:
    return {name: res for name, res in resources.items() if res["Type"] == kind}


def _statements(resources: dict[str, Any], role: str) -> list[dict[str, Any]]:
    policies = resources[role]["Properties"].get("Policies", [])
    return [s for p in policies for s in p["PolicyDocument"]["Statement"]]


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for statement in statements:
        action = statement["Action"]
        found.update([action] if isinstance(action, str) else action)
    return found


def test_template__passes_cfn_lint() -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), str(INFRA / "template.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_template__functions_urls_and_schedules(transformed: dict[str, Any]) -> None:
    resources = transformed["Resources"]
    functions = _of_type(resources, "AWS::Lambda::Function")
    assert set(functions) == {
        "SubmitFunction",
        "ApiFunction",
        "DeliverTickFunction",
        "DigestTickFunction",
        "RetentionTickFunction",
    }
    urls = _of_type(resources, "AWS::Lambda::Url")
    assert {u["Properties"]["TargetFunctionArn"]["Ref"] for u in urls.values()} == {
        "SubmitFunction",
        "ApiFunction",
    }
    assert all(u["Properties"]["AuthType"] == "NONE" for u in urls.values())
    assert all("Cors" not in u["Properties"] for u in urls.values())  # CORS is the app's
    rules = _of_type(resources, "AWS::Events::Rule")
    assert {r["Properties"]["ScheduleExpression"] for r in rules.values()} == {"rate(1 minute)"}
    assert {r["Properties"]["Targets"][0]["Arn"]["Fn::GetAtt"][0] for r in rules.values()} == {
        "DeliverTickFunction",
        "DigestTickFunction",
        "RetentionTickFunction",
    }
    for function in functions.values():
        variables = function["Properties"]["Environment"]["Variables"]
        assert "resolve:secretsmanager" in json.dumps(variables["POSTBAG_DATABASE_URL"])
    assert set(transformed["Outputs"]) >= {"SubmitUrl", "ApiUrl"}


def test_template__bucket_is_private_encrypted_and_tls_only(transformed: dict[str, Any]) -> None:
    resources = transformed["Resources"]
    bucket = resources["AttachmentsBucket"]["Properties"]
    assert bucket["PublicAccessBlockConfiguration"] == dict.fromkeys(
        ["BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"],
        True,
    )
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    rules = bucket["LifecycleConfiguration"]["Rules"]
    assert any("AbortIncompleteMultipartUpload" in rule for rule in rules)
    policy = resources["AttachmentsBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"]["Bool"]["aws:SecureTransport"] == "false"
        for s in policy
    )


def test_template__least_privilege_per_function(transformed: dict[str, Any]) -> None:
    resources = transformed["Resources"]
    submit = _actions(_statements(resources, "SubmitFunctionRole"))
    deliver = _actions(_statements(resources, "DeliverTickFunctionRole"))
    retention = _actions(_statements(resources, "RetentionTickFunctionRole"))
    assert submit == {"s3:PutObject", "lambda:InvokeFunction"}
    assert retention == {"s3:DeleteObject"}
    assert _actions(_statements(resources, "DigestTickFunctionRole")) == set()
    assert not any(action.startswith("ses:") for action in submit)
    assert not any(action.startswith("s3:") for action in deliver)
    assert {"ses:SendEmail", "ses:SendRawEmail"} <= deliver


def test_template__submit_and_api_wake_only_the_deliver_function(
    transformed: dict[str, Any],
) -> None:
    resources = transformed["Resources"]
    deliver_arn = {"Fn::GetAtt": ["DeliverTickFunction", "Arn"]}
    for name in ("SubmitFunction", "ApiFunction"):
        invokes = [
            s
            for s in _statements(resources, f"{name}Role")
            if "lambda:InvokeFunction" in _actions([s])
        ]
        assert [s["Resource"] for s in invokes] == [deliver_arn]
        variables = resources[name]["Properties"]["Environment"]["Variables"]
        assert variables["POSTBAG_DELIVER_FUNCTION_NAME"] == {"Ref": "DeliverTickFunction"}
    for name in ("DeliverTickFunction", "DigestTickFunction", "RetentionTickFunction"):
        assert "lambda:InvokeFunction" not in _actions(_statements(resources, f"{name}Role"))
    invoke_config = _of_type(resources, "AWS::Lambda::EventInvokeConfig")
    assert [c["Properties"]["MaximumRetryAttempts"] for c in invoke_config.values()] == [0]


def _handler_names() -> set[str]:
    names = set(re.findall(r'Command: \["([a-z_.]+)"\]', (INFRA / "template.yaml").read_text()))
    cmd = re.search(r'^CMD \["([a-z_.]+)"\]', (INFRA / "Dockerfile").read_text(), re.MULTILINE)
    assert cmd is not None
    return names | {cmd.group(1)}


def test_image__every_handler_name_is_an_importable_callable(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POSTBAG_DATABASE_URL", db_url)
    monkeypatch.setenv("POSTBAG_SECRET_KEY", TEST_SECRET_KEY)
    names = _handler_names()
    assert len(names) == 5
    found: dict[str, bool] = {}

    def load() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            for name in names:
                module_name, _, attribute = name.rpartition(".")
                sys.modules.pop(module_name, None)
                try:
                    module = importlib.import_module(module_name)
                except ImportError:
                    found[name] = False
                    continue
                found[name] = callable(getattr(module, attribute, None))
        finally:
            loop.close()
            asyncio.set_event_loop(None)

    thread = threading.Thread(target=load)
    thread.start()
    thread.join(timeout=60)
    assert found == dict.fromkeys(names, True)


def test_migrate_command__one_off_invocation_applies_migrations(
    empty_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, again = invoke(
        "api",
        [{"postbag_command": "migrate"}] * 2,
        FakeContext(),
        monkeypatch,
        POSTBAG_DATABASE_URL=empty_db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
    )
    assert first == {"command": "migrate", "applied": [m.name for m in discover()]}
    assert again == {"command": "migrate", "applied": []}

    async def tables() -> int:
        conn = await connect(empty_db_url)
        try:
            cur = await conn.execute(
                "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'forms'"
            )
            row = await cur.fetchone()
            return int(row["n"]) if row else 0
        finally:
            await conn.close()

    assert asyncio.run(tables()) == 1
