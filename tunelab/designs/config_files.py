"""Knob configurations written in files: a sysctl.d file (``name = value`` lines) or a YAML/JSON mapping.

Read by the CLI (``--baseline FILE``, ``--candidate FILE``) and by a change file's ``baseline:`` and
``candidate:`` (:mod:`tunelab.designs.change`); values stay text or int for the knobs to validate.

>>> parse_value(" 4096 "), parse_value("bbr")
(4096, 'bbr')
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tunelab.errors import DesignError


def parse_value(text: str) -> Any:
    """``"4096"`` -> 4096; other text (``"4096 131072 6291456"``, ``"bbr"``) stays text for the knob to parse."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return text


def read_config_file(path: Path) -> dict[str, Any]:
    """A sysctl.d file (``name = value``) or a YAML/JSON mapping (or a design fragment's ``knobs:`` baselines)."""
    if not path.exists():
        raise DesignError(f"config file {path} does not exist; give KNOB=VALUE or an existing file")
    if not path.is_file():
        raise DesignError(f"config file {path} is not a regular file; give a sysctl.d file or a YAML mapping")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml", ".json"):
        return mapping_config(path, text)
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if "=" not in line:
            raise DesignError(f"{path}:{number}: {line!r} is not 'name = value'")
        name, _, value = line.partition("=")
        out[name.strip()] = parse_value(value)
    return out


def mapping_config(path: Path, text: str) -> dict[str, Any]:
    """A YAML/JSON config file: knob id -> value, or a design fragment's ``knobs:`` with their baselines."""
    import yaml

    from tunelab.model import KnobId, level_from_json

    data = yaml.safe_load(text) if path.suffix != ".json" else json.loads(text)
    if isinstance(data, dict) and "knobs" in data:
        return {str(KnobId(entry["name"], entry.get("host") or "server", entry.get("device") or None)):
                level_from_json(entry["baseline"]) for entry in data["knobs"]}
    if not isinstance(data, dict):
        raise DesignError(f"{path} must hold a mapping knob id -> value")
    return {k: level_from_json(v) for k, v in data.items()}


__all__ = ["mapping_config", "parse_value", "read_config_file"]
