"""Command-line strings -> the typed values the API takes: ``KEY=VALUE`` options, knob configs, ``-p`` parameters,
the screen's ``--metric`` and ``--baseline COL=VALUE``.

The API (:mod:`tunelab.api`) takes dicts of typed values; only the CLI reads text, here.

>>> parse_config(["net.core.somaxconn=4096", "net.ipv4.tcp_congestion_control=bbr"])
{'net.core.somaxconn': 4096, 'net.ipv4.tcp_congestion_control': 'bbr'}
>>> parse_options(["cv=0.05", "surface=hard512"])
{'cv': 0.05, 'surface': 'hard512'}
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from tunelab.errors import DataError, DesignError, TunelabError
from tunelab.model import Metric, ParseError


def parse_options(items: Sequence[str], flag: str = "--target-option") -> dict[str, Any]:
    """``KEY=VALUE`` items -> a dict; values are read as JSON when they are JSON (``cv=0.05``), as a YAML
    flow collection when they look like one (``connect_kwargs={key_filename: /root/.ssh/id}``), else text.

    >>> parse_options(["cv=0.05", "server=root@db1", "connect_kwargs={key_filename: /root/.ssh/id}"])
    {'cv': 0.05, 'server': 'root@db1', 'connect_kwargs': {'key_filename': '/root/.ssh/id'}}
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise DesignError(f"{flag} {item!r} must look like KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = _flow_collection(value, f"{flag} {key}") if value.lstrip()[:1] in ("{", "[") else value
    return out


def _flow_collection(text: str, where: str) -> Any:
    """A YAML flow mapping or sequence (``{a: 1}``, ``[x, y]``); DesignError naming ``where`` otherwise."""
    import yaml   # only when a value looks like a collection: `--help` stays light

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        raise DesignError(f"{where}: {text!r} is not a valid mapping or list ({problem}); write it as "
                          "{key: value, ...} or [a, b]") from None
    if not isinstance(value, (dict, list)):
        raise DesignError(f"{where}: {text!r} is not a mapping or list; write it as {{key: value, ...}} or [a, b]")
    return value


def parse_config(items: Sequence[str]) -> dict[str, Any]:
    """KNOB=VALUE items and/or files -> knob id -> value (values validated later by the knobs; files are read by
    :func:`tunelab.designs.config_files.read_config_file`, imported here so ``--help`` stays light)."""
    from tunelab.designs.config_files import parse_value, read_config_file

    config: dict[str, Any] = {}
    for item in items:
        if "=" in item and not Path(item).exists():
            name, _, value = item.partition("=")
            if not name.strip():
                raise DesignError(f"{item!r} must look like KNOB=VALUE, e.g. net.core.somaxconn=4096")
            config[name.strip()] = parse_value(value)
        else:
            config.update(read_config_file(Path(item)))
    return config


def parse_baseline(items: Sequence[str]) -> dict[str, Any] | str:
    """``--baseline`` items: ``"current"`` when none (or only ``current``) is given, else their config."""
    rest = [item for item in items if item != "current"]
    return parse_config(rest) if rest else "current"


def parse_parameters(items: Sequence[str]) -> dict[str, Any]:
    """``["objectives=[qps:max]", "x=3"]`` -> ``{"objectives": ["qps:max"], "x": 3}`` (values as YAML).

    >>> parse_parameters(["objectives=[qps:max]", "n=3", "name=abc"])
    {'objectives': ['qps:max'], 'n': 3, 'name': 'abc'}
    """
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise TunelabError(f"-p {item!r} must look like NAME=VALUE with NAME a Python identifier, "
                               "e.g. -p objectives=[qps:max]")
        try:
            out[name.strip()] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise TunelabError(f"-p {item!r}: the value is not valid YAML ({exc})") from None
    return out


def parse_metrics(texts: Sequence[str]) -> list[Metric]:
    """``--metric NAME[:max|:min][:SESOI]`` texts as metrics (:meth:`tunelab.model.Metric.parse`).

    >>> parse_metrics(["qps:max:5", "latency_mean_ms:min"])[1].to_json()
    {'name': 'latency_mean_ms', 'direction': 'minimize', 'sesoi_pct': 5.0}
    """
    try:
        return [Metric.parse(text) for text in texts]
    except ParseError as exc:
        # the model's message starts "metric 'TEXT'": on the command line that is the --metric flag
        raise DataError(f"--{exc}") from None


def parse_screen_baselines(items: Sequence[str]) -> dict[str, str]:
    """``--baseline COL=VALUE`` items of ``tunelab screen`` -> column -> the level's text (matched to the
    data's levels by :func:`tunelab.study_data.match_level`).

    >>> parse_screen_baselines(["net.core.somaxconn=4096"])
    {'net.core.somaxconn': '4096'}
    """
    out: dict[str, str] = {}
    for item in items:
        column, sep, text = item.partition("=")
        if not sep or not column:
            raise DataError(f"--baseline {item!r} must be COL=VALUE, e.g. --baseline net.core.somaxconn=4096")
        out[column] = text
    return out


__all__ = ["parse_baseline", "parse_config", "parse_metrics", "parse_options", "parse_parameters",
           "parse_screen_baselines"]


def add_target_options(parser: Any) -> None:
    """The flags that choose where a search measures, shared by ``refine`` and ``tune``: the target, the SYNTHETIC
    simulator's surface and noise, the host-global and design-command permissions, and the trial store."""
    add = parser.add_argument
    add("--target", metavar="TYPE", help="override the design's target (lab, local, ssh, simulator)")
    add("--surface", default="simple", help="SYNTHETIC simulator surface without a design: simple, null, hard512, "
        "smooth, tradeoff, wide27 (its host-global knobs need --allow-host-global)")
    add("--cv", type=float, default=0.03, help="simulator noise CV (default 0.03)")
    add("--allow-host-global", action="store_true", help="permit host-global knobs")
    add("--allow-design-commands", action="store_true", help="let the design's target options run commands as root")
    add("--store", type=Path, metavar="PATH", help="trial store (default data/<study>.sqlite)")
