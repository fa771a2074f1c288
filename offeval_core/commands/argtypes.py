"""Argument types of the command line: argparse reports a bad value with the flag's name and this text
(``argument --seed: must be a non-negative integer (0, 1, 2, …), got '-1'``), exit status 2."""

from __future__ import annotations

import argparse
import ipaddress
import re

from offeval_core.errors import SpecError

__all__ = ["host", "memory_size", "non_negative_int", "positive_int"]


def _int(text: str, *, low: int, what: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """``0``, ``1``, ``2``, … (a seed, a number of resamples)."""
    return _int(text, low=0, what="a non-negative integer (0, 1, 2, …)")


def positive_int(text: str) -> int:
    """``1``, ``2``, … (threads, days, a cut-off)."""
    return _int(text, low=1, what="a positive integer (1, 2, …)")


_HOSTNAME = re.compile(r"(?=.{1,253}\Z)(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?\Z")


def host(text: str) -> str:
    """An address to bind: an IPv4 / IPv6 address or a host name (``127.0.0.1``, ``0.0.0.0``, ``localhost``);
    never empty, which the server would read as every interface."""
    value = str(text).strip()
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    if not _HOSTNAME.match(value):
        raise argparse.ArgumentTypeError(f"must be an IP address or a host name (127.0.0.1 keeps the server on this "
                                         f"machine, 0.0.0.0 opens it to the network), got {text!r}")
    return value


def memory_size(text: str) -> str:
    """A memory budget: a positive size with a unit (``2GB``, ``512MiB``) or a share of the machine's memory
    (``80%``), as :func:`offeval_core.memory.memory_bytes` reads it."""
    from offeval_core.memory import memory_bytes

    try:
        memory_bytes(text, total=1)
    except SpecError:
        raise argparse.ArgumentTypeError(f"must be a positive size with a unit such as 2GB or 512MiB, or a share "
                                         f"of the memory such as 80%, got {text!r}") from None
    return re.sub(r"\s+", "", str(text))
