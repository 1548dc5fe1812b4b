"""Counter names and their tidy columns: ``counter.<Group>.<Name>`` at the server,
``counter.client.<Group>.<Name>`` at the load generator, each a rate per second of the window.

>>> counter_column("TcpExt.ListenOverflows"), counter_column("client.Udp.RcvbufErrors")
('counter.TcpExt.ListenOverflows', 'counter.client.Udp.RcvbufErrors')
"""
from __future__ import annotations

import re
from typing import Any

import pandas as pd

from tunelab.errors import StoreError, quoted
from tunelab.model import COUNTER_PREFIX as COLUMN_PREFIX
from tunelab.model import counter_columns, is_counter_column

#: a stored counter name: an optional place other than the server, a group, a name
_NAME = re.compile(r"(?:client\.)?[A-Za-z][A-Za-z0-9]{0,31}\.[A-Za-z0-9_]{1,64}")


def check_counter_name(name: Any, where: str = "counter name") -> str:
    """``name`` if it is a counter name (``TcpExt.ListenOverflows``, ``client.Udp.InErrors``), else StoreError.

    >>> check_counter_name("proc.cpu_s")
    'proc.cpu_s'
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise StoreError(f"{where} {quoted(name)} is not a counter name like TcpExt.ListenOverflows or "
                         "client.Udp.RcvbufErrors; the store is damaged or was edited")
    return name


def counter_column(name: str) -> str:
    """The tidy column of the counter ``name``."""
    return COLUMN_PREFIX + name


def drop_still_counters(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without the counter columns that never moved (zero or missing in every row).

    >>> f = pd.DataFrame({"qps": [1.0, 2.0], "counter.Tcp.InSegs": [5.0, 0.0], "counter.Udp.InErrors": [0.0, None]})
    >>> list(drop_still_counters(f).columns)
    ['qps', 'counter.Tcp.InSegs']
    """
    still = [column for column in counter_columns(frame) if frame[column].fillna(0).eq(0).all()]
    return frame.drop(columns=still)
