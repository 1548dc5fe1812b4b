"""Knob families: where a knob's value lives and how it is read and written on a target.

Each family is registered in :data:`FAMILIES` and talks to the machine only through the target
primitives ``read_text``, ``write_text``, ``run`` and ``is_writable`` (never a shell string), so
the same knob works in lab namespaces, on the local host and over ssh.

========  ======================================================  ==============================
family    file                                                    write
========  ======================================================  ==============================
sysctl    ``/proc/sys/<name with dots as slashes>``               ``write_text`` to the file
block     ``/sys/block/<device>/queue/<attr>``                    ``write_text`` to the file
link      ``/sys/class/net/<device>/{mtu,tx_queue_len}``          ``ip link set dev D mtu N``
========  ======================================================  ==============================
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tunelab.errors import KnobError
from tunelab.registry import Registry

if TYPE_CHECKING:
    from tunelab.knobs.base import Knob
    from tunelab.targets.base import Target

#: a device name a knob may be written on: one path component, never ``/``, ``.`` or ``..``
DEVICE_NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,63}")

#: seconds allowed for ``ip link set``
LINK_COMMAND_TIMEOUT_S = 10.0


def check_device_name(knob_name: str, device: str) -> str:
    """Return ``device`` if it is a safe single path component (no ``/``, not ``..``)."""
    if not isinstance(device, str) or not DEVICE_NAME_PATTERN.fullmatch(device) or device in (".", ".."):
        raise KnobError(f"{knob_name}: device {device!r} is not a valid device name; use a name like 'loop0' or "
                        "'veth0' (letters, digits, '_', '.', ':', '@', '-'; no '/')")
    return device


#: symbolic devices a design may name; the target resolves them (:meth:`tunelab.targets.base.Target.resolve_device`:
#: the lab's disk and its server veth), a target that does not know one refuses it
SYMBOLIC_DEVICES = ("@disk", "@link")


def check_design_device(knob_name: str, device: str) -> str:
    """Return ``device`` if a design may name it: one of :data:`SYMBOLIC_DEVICES`, or a name
    :func:`check_device_name` (the check every write makes) accepts; KnobError otherwise.

    >>> check_design_device("link.mtu", "@link"), check_design_device("link.mtu", "veth0")
    ('@link', 'veth0')
    """
    if device in SYMBOLIC_DEVICES:
        return device
    if isinstance(device, str) and device.startswith("@"):
        raise KnobError(f"{knob_name}: device {device!r} is not a symbolic device tunelab knows; use one of "
                        f"{', '.join(SYMBOLIC_DEVICES)} or a real device name such as 'loop0' or 'veth0'")
    return check_device_name(knob_name, device)


class KnobFamily:
    """Base family: the value is the text of one file, read and written with the target primitives."""

    name = "abstract"
    needs_device = False

    def path(self, knob: "Knob", target: "Target", device: str | None) -> str:
        raise NotImplementedError

    def device(self, knob: "Knob", target: "Target", device: str | None) -> str | None:
        """The resolved device name, or ``None`` for families without devices."""
        if not self.needs_device:
            if device is not None:
                raise KnobError(f"{knob.name}: a {self.name} knob takes no device, but device {device!r} was given; "
                                "remove `device:` from this knob")
            return None
        if device is None:
            raise KnobError(f"{knob.name}: a {self.name} knob needs a device (e.g. {self.example_device!r}); "
                            "add `device:` to this knob")
        resolved = target.resolve_device(device)
        if isinstance(resolved, str) and resolved.startswith("@"):
            raise KnobError(f"{knob.name}: target {target.name!r} does not know the symbolic device {resolved!r} "
                            "(only the lab defines '@disk' and '@link'); name a real device such as 'sda' or 'eth0'")
        return check_device_name(knob.name, resolved)

    example_device = ""

    def read_text(self, knob: "Knob", target: "Target", host: str, device: str | None) -> str:
        return target.read_text(host, self.path(knob, target, device))

    def write_text(self, knob: "Knob", target: "Target", host: str, text: str, device: str | None) -> None:
        target.write_text(host, self.path(knob, target, device), text)

    def is_writable(self, knob: "Knob", target: "Target", host: str, device: str | None) -> bool:
        return bool(target.is_writable(host, self.path(knob, target, device)))


FAMILIES: Registry[KnobFamily] = Registry("knob family")


def get_family(name: str) -> KnobFamily:
    """The family registered as ``name`` (:class:`KnobError` listing the known ones otherwise)."""
    try:
        return FAMILIES.get(name)
    except KeyError as exc:
        raise KnobError(str(exc.args[0])) from None


class SysctlFamily(KnobFamily):
    """``net.ipv4.tcp_rmem`` -> ``/proc/sys/net/ipv4/tcp_rmem``."""

    name = "sysctl"

    def path(self, knob: "Knob", target: "Target", device: str | None) -> str:
        self.device(knob, target, device)
        return "/proc/sys/" + knob.name.replace(".", "/")


class BlockQueueFamily(KnobFamily):
    """``block.queue.scheduler`` on ``loop0`` -> ``/sys/block/loop0/queue/scheduler``."""

    name = "block"
    needs_device = True
    example_device = "loop0"
    prefix = "block.queue."

    def path(self, knob: "Knob", target: "Target", device: str | None) -> str:
        if not knob.name.startswith(self.prefix):
            raise KnobError(f"{knob.name}: block knobs must be named {self.prefix}<attribute>")
        resolved = self.device(knob, target, device)
        return f"/sys/block/{resolved}/queue/{knob.name[len(self.prefix):]}"


class LinkFamily(KnobFamily):
    """``link.mtu`` / ``link.txqueuelen``: read from sysfs, written with ``ip link set``."""

    name = "link"
    needs_device = True
    example_device = "veth0"
    #: catalogue attribute -> (sysfs file under /sys/class/net/<dev>/, `ip link set` keyword)
    attributes = {"mtu": ("mtu", "mtu"), "txqueuelen": ("tx_queue_len", "txqueuelen")}

    def _attribute(self, knob: "Knob") -> tuple[str, str]:
        attribute = knob.name.removeprefix("link.")
        if attribute not in self.attributes:
            raise KnobError(f"{knob.name}: unknown link attribute {attribute!r}; known: "
                            f"{', '.join('link.' + a for a in self.attributes)}")
        return self.attributes[attribute]

    def path(self, knob: "Knob", target: "Target", device: str | None) -> str:
        resolved = self.device(knob, target, device)
        return f"/sys/class/net/{resolved}/{self._attribute(knob)[0]}"

    def write_text(self, knob: "Knob", target: "Target", host: str, text: str, device: str | None) -> None:
        resolved = self.device(knob, target, device)
        argv = ["ip", "link", "set", "dev", resolved, self._attribute(knob)[1], text.strip()]
        result = target.run(host, argv, timeout_s=LINK_COMMAND_TIMEOUT_S)
        if not result.ok:
            reason = "timed out" if result.timed_out else f"exit {result.returncode}"
            raise KnobError(f"{knob.name}: `{' '.join(argv)}` on {host} failed ({reason}): "
                            f"{(result.stderr or result.stdout).strip()}")

    def is_writable(self, knob: "Knob", target: "Target", host: str, device: str | None) -> bool:
        # `ip link set` needs CAP_NET_ADMIN, which is what lets one write the sysfs file too.
        return super().is_writable(knob, target, host, device)


FAMILIES.add("sysctl", SysctlFamily())
FAMILIES.add("block", BlockQueueFamily())
FAMILIES.add("link", LinkFamily())
