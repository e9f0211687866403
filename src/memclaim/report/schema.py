"""The published JSON Schema of report.json (``schemas/report-<version>.schema.json``).

The schema is versioned with :data:`memclaim.report.core.SCHEMA_VERSION`: a 1.x report keeps the
meaning of every field the 1.0 schema names; a change of meaning is a new major version and a
new schema file. Validation needs the ``jsonschema`` package (a test dependency)::

    from memclaim.report.schema import validate_report
    validate_report(json.loads(Path("out/report.json").read_text()))   # raises InputError if invalid
"""

from __future__ import annotations

import json
from importlib import resources

from ..errors import InputError, require
from .core import SCHEMA_VERSION

__all__ = ["schema_name", "load_schema", "validate_report"]


def schema_name(version: str = SCHEMA_VERSION) -> str:
    """The file name of report.json's JSON Schema for ``version`` (shipped in report/schemas).

    >>> from memclaim.report.schema import schema_name
    >>> schema_name("1.0")
    'report-1.0.schema.json'
    """
    return f"report-{version}.schema.json"


def load_schema(version: str = SCHEMA_VERSION) -> dict:
    """The JSON Schema (a dict) of report.json for ``version``.

    >>> from memclaim.report.schema import load_schema
    >>> load_schema("1.0")["title"]
    'memclaim report.json, schema version 1.0'
    """
    try:
        text = (
            resources.files("memclaim.report")
            .joinpath("schemas", schema_name(version))
            .read_text(encoding="utf-8")
        )
    except (FileNotFoundError, OSError):
        raise InputError(
            f"no published report schema for version {version!r}",
            hint=f"this memclaim writes schema version {SCHEMA_VERSION}",
        ) from None
    return json.loads(text)


def validate_report(report: dict) -> None:
    """Check a parsed report.json against the schema of its own ``schema_version``; raise
    :class:`memclaim.errors.InputError` listing every violation.

    >>> from memclaim.report.schema import validate_report
    >>> validate_report({"schema_version": "1.0", "command": "test"})
    Traceback (most recent call last):
    ...
    memclaim.errors.InputError: report.json does not match schema '1.0': (top): 'memclaim_version' is a required property; ...
    """
    jsonschema = require("jsonschema", "test")
    version = report.get("schema_version") if isinstance(report, dict) else None
    schema = load_schema(str(version) if version is not None else SCHEMA_VERSION)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    errors = sorted(cls(schema).iter_errors(report), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [
            f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors[:20]
        ]
        raise InputError(
            f"report.json does not match schema {version!r}: " + "; ".join(lines),
            hint="report.json must be written by memclaim's report writer",
        )
