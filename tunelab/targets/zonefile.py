"""An operator's zone file made self-contained: each ``$INCLUDE`` inlined from the zone file's own folder.

A zone file may say ``$INCLUDE <file> [<origin>]`` (RFC 1035 section 5.1). Every server's checker
accepts an include of any file on the machine, and the server would then read (and re-read at every
restart) a file nobody checked. So the lab never hands a server an ``$INCLUDE``:

* an include of a file inside the zone file's own folder (or a folder below it), symlinks and ``..``
  resolved, is inlined into the text the lab checks and serves, recursively (at most
  :data:`MAX_INCLUDE_DEPTH` levels, :data:`MAX_INCLUDES` files, the zone file's size limit in all; a
  file that includes itself, directly or not, is refused);
* an include of anything else is refused with one line: the including file, its line, the rule.

A relative file name is relative to the folder of the file that names it. With an origin, the inlined
text is framed by ``$ORIGIN <origin>``; after it, ``$ORIGIN`` restores the including file's origin
whatever the included file set (RFC 1035: "a $INCLUDE entry never changes the relative origin of the
parent file"). ``$TTL`` set in an included file stays in force after it, as in BIND.

Directives are recognised as the servers do: ``$`` in a line's first column, outside parentheses and
quotes. To leave no doubt, an ``$INCLUDE`` or ``$ORIGIN`` that starts a line anywhere else (after
blanks, inside a parenthesised record, after a carriage return or form feed) is refused, not guessed.

Examples
--------
>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "hosts.inc").write_text("www A 192.0.2.10\\n$ORIGIN other.\\n")
>>> top = folder / "a.zone"
>>> _ = top.write_text('@ SOA ns1 h 1 2 3 4 5\\n$include "hosts.inc" sub ; the web hosts\\nns1 A 192.0.2.1\\n')
>>> print(inline_includes(top.read_text(), str(top), "example.net.", 10_000).text, end="")
@ SOA ns1 h 1 2 3 4 5
$ORIGIN sub.example.net.
www A 192.0.2.10
$ORIGIN other.
$ORIGIN example.net.
ns1 A 192.0.2.1
>>> _ = top.write_text("$INCLUDE /etc/passwd\\n")
>>> inline_includes(top.read_text(), str(top), "example.net.", 10_000)    # doctest: +ELLIPSIS
Traceback (most recent call last):
...
tunelab.errors.TargetError: /tmp/.../a.zone:1: $INCLUDE '/etc/passwd' is outside the zone file's folder ...
>>> import shutil; shutil.rmtree(folder)
"""
from __future__ import annotations

import bisect
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from tunelab.errors import TargetError

#: how deep includes may nest (the zone file includes a file that includes a file ...)
MAX_INCLUDE_DEPTH = 8
#: how many files one zone file may include in all
MAX_INCLUDES = 1000
#: characters of a file name quoted in an error (zone files are the operator's data)
QUOTE_CHARS = 60
#: ``$INCLUDE`` anywhere, any case: a text without it is returned as it is
_ANY_INCLUDE = re.compile(r"\$include", re.IGNORECASE)
#: a directive that must stand in the first column of a line of its own: ``$INCLUDE`` or ``$ORIGIN``
_GUARDED = re.compile(r"[ \t]*\$(include|origin)\b", re.IGNORECASE)
#: an ``$INCLUDE`` at the start of any line of the inlined text (which must hold none)
_LEFT_INCLUDE = re.compile(r"(?:^|[\n\r\f\v])[ \t]*\$include", re.IGNORECASE)
#: characters some parser might take for a line break besides ``\n``
_OTHER_BREAKS = re.compile(r"[\r\f\v]")
#: one part of a directive line: blanks, a comment, a quoted string, a plain token, or one odd character
_PART = re.compile(r'(\s+)|(;.*)|"((?:[^"\\]|\\.)*)"|((?:[^\s"();\\]|\\.)+)|(.)', re.DOTALL)
#: a backslash escape: ``\DDD`` (decimal) or ``\X``
_ESCAPE = re.compile(r"\\(\d{3}|.)", re.DOTALL)

Key = tuple[int, int]


@dataclass(frozen=True)
class InlinedZone:
    """A zone file's text with its includes inlined, and where each of its lines came from.

    ``segments`` holds ``(first line in text, source file, its line there)``, one per run of lines copied
    in order from one file; the ``$ORIGIN`` lines the inliner writes map to the line of their ``$INCLUDE``.
    """

    text: str
    segments: tuple[tuple[int, str, int], ...] = field(default=())

    def source_line(self, line: int) -> tuple[str, int] | None:
        """``(file, line)`` of line ``line`` (1-based) of :attr:`text`, None outside it.

        >>> InlinedZone("a\\nb\\nc\\n", ((1, "/z", 1), (2, "/i", 5))).source_line(3)
        ('/i', 6)
        """
        index = bisect.bisect_right([start for start, _, _ in self.segments], line) - 1
        if index < 0 or line > self.text.count("\n") + 1:
            return None
        start, path, first = self.segments[index]
        return path, first + line - start


def inline_includes(text: str, path: str, origin: str, limit: int) -> InlinedZone:
    """``text`` (the zone file ``path`` for the absolute ``origin``) with every ``$INCLUDE`` inlined.

    TargetError, one line naming the file and line, for an include outside the folder of ``path``
    (symlinks and ``..`` resolved), a missing, non-regular or non-UTF-8 file, a cycle, deeper nesting than
    :data:`MAX_INCLUDE_DEPTH`, more than :data:`MAX_INCLUDES` files or ``limit`` bytes in all, and an
    ``$INCLUDE``/``$ORIGIN`` that does not stand in the first column of a line of its own. A text without
    ``$INCLUDE`` comes back unchanged.
    """
    if _ANY_INCLUDE.search(text) is None:
        return InlinedZone(text, ((1, path, 1),))
    real = Path(os.path.realpath(path))
    info = os.stat(real)
    inliner = _Inliner(real.parent, limit, len(text.encode()))
    inliner.inline(text, path, real.parent, origin, ((info.st_dev, info.st_ino),))
    inlined = "".join(inliner.lines)
    if _LEFT_INCLUDE.search(inlined):          # cannot happen: each one was inlined or refused; never serve one
        raise TargetError(f"{path}: an $INCLUDE is left after inlining; report this as a tunelab bug")
    return InlinedZone(inlined, tuple(inliner.segments))


def quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` as a one-line Python literal, cut to ``limit`` characters.

    >>> quote("a" * 70)
    "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...'"
    >>> quote("x\\ny")
    "'x\\\\ny'"
    """
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def resolve_origin(name: str, current: str) -> str:
    """The absolute origin ``name`` (as written in a zone file) names where ``current`` is the origin.

    >>> resolve_origin("sub", "example.net."), resolve_origin("a.b.", "example.net."), resolve_origin("@", "x.")
    ('sub.example.net.', 'a.b.', 'x.')
    >>> resolve_origin("a\\\\.", "x."), resolve_origin("sub", ".")
    ('a\\\\..x.', 'sub.')
    """
    if name == "@":
        return current
    body = name[:-1]
    if name.endswith(".") and (len(body) - len(body.rstrip("\\"))) % 2 == 0:
        return name
    return f"{name}." if current == "." else f"{name}.{current}"


def directive_parts(line: str) -> tuple[list[tuple[str, str]], str]:
    """A directive line's tokens ``(as written, value)`` up to its comment, and its odd characters.

    A quoted token's value is its text without the quotes; backslash escapes are decoded in values.

    >>> directive_parts('$INCLUDE "my \\\\"zone\\\\".inc" sub. ; hosts')
    ([('$INCLUDE', '$INCLUDE'), ('"my \\\\"zone\\\\".inc"', 'my "zone".inc'), ('sub.', 'sub.')], '')
    >>> directive_parts("$INCLUDE ( a.inc )")[1]
    '()'
    """
    tokens: list[tuple[str, str]] = []
    odd = ""
    for match in _PART.finditer(line):
        blank, comment, quoted, plain, other = match.groups()
        if comment is not None:
            break
        if quoted is not None or plain is not None:
            tokens.append((match.group(0), _ESCAPE.sub(_unescape, quoted if quoted is not None else plain)))
        elif other is not None:
            odd += other
    return tokens, odd


def _unescape(match: re.Match[str]) -> str:
    escaped = match.group(1)
    return chr(int(escaped)) if escaped.isdigit() else escaped


def _scan(line: str, parens: int, quoted: bool) -> tuple[int, bool]:
    """The parentheses depth and quote state after ``line`` (escapes and comments taken into account)."""
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if quoted:
            quoted = char != '"'
        elif char == '"':
            quoted = True
        elif char == ";":
            break
        elif char in "()":
            parens = parens + 1 if char == "(" else max(0, parens - 1)
        index += 1
    return parens, quoted


class _Inliner:
    """Copies a zone file's lines into :attr:`lines`, each ``$INCLUDE`` replaced by its file's lines."""

    def __init__(self, root: Path, limit: int, size: int) -> None:
        self.root, self.limit, self.size = root, limit, size
        self.lines: list[str] = []
        self.segments: list[tuple[int, str, int]] = []
        self.includes = 0

    def emit(self, line: str, path: str, number: int) -> None:
        """Append ``line`` (line ``number`` of ``path``), starting a new segment where the run breaks."""
        out_line = len(self.lines) + 1
        last = self.segments[-1] if self.segments else None
        if last is None or last[1] != path or last[2] + out_line - last[0] != number:
            self.segments.append((out_line, path, number))
        self.lines.append(line)

    def inline(self, text: str, path: str, folder: Path, origin: str, stack: tuple[Key, ...]) -> None:
        """Copy ``text`` (the file ``path`` in ``folder``, starting at ``origin``) with its includes inlined."""
        parens, quoted = 0, False
        lines = text.split("\n")
        for number, line in enumerate(lines, start=1):
            if number == len(lines) and not line:
                break
            at_directive = not parens and not quoted and line.startswith("$")
            _refuse_hidden_directive(line, at_directive, f"{path}:{number}")
            if at_directive:
                tokens, odd = directive_parts(line)
                keyword = tokens[0][0].lower() if tokens else ""
                if keyword == "$include":
                    self.include(tokens, odd, f"{path}:{number}", folder, origin, stack)
                    continue
                if keyword == "$origin" and len(tokens) >= 2:
                    origin = resolve_origin(tokens[1][0], origin)
            if parens or quoted or "(" in line or '"' in line or ")" in line:
                parens, quoted = _scan(line, parens, quoted)
            self.emit(line + ("\n" if number < len(lines) or len(stack) > 1 else ""), path, number)

    def include(self, tokens: list[tuple[str, str]], odd: str, where: str, folder: Path, origin: str,
                stack: tuple[Key, ...]) -> None:
        """Inline the file an ``$INCLUDE`` line (at ``where``, with ``tokens``) names, then restore ``origin``."""
        if not 2 <= len(tokens) <= 3 or odd:
            raise TargetError(f"{where}: write $INCLUDE on one line as '$INCLUDE FILE [ORIGIN] [; comment]' "
                              "(RFC 1035), without parentheses")
        path, key, text = self.read(tokens[1][1], where, folder, stack)
        file, number = where.rsplit(":", 1)
        included_origin = origin
        if len(tokens) == 3:
            included_origin = resolve_origin(tokens[2][0], origin)
            self.emit(f"$ORIGIN {included_origin}\n", file, int(number))
        self.inline(text, str(path), path.parent, included_origin, stack + (key,))
        self.emit(f"$ORIGIN {origin}\n", file, int(number))      # RFC 1035: the including file's origin again

    def read(self, name: str, where: str, folder: Path, stack: tuple[Key, ...]) -> tuple[Path, Key, str]:
        """The real path, identity and text of the file ``name`` (relative to ``folder``) an include names."""
        shown = f"{where}: $INCLUDE {quote(name)}"
        if "\0" in name or not name:
            raise TargetError(f"{shown} is not a file name")
        real = Path(os.path.realpath(folder / name))
        outside = (f"{shown} is outside the zone file's folder {self.root}: only a file in that folder (after "
                   "resolving symlinks and '..') is included, inlined into the lab's own copy; copy the file there")
        if not real.is_relative_to(self.root):
            raise TargetError(outside)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise TargetError(f"{shown}: no such file ({real})") from None
        except OSError as exc:
            raise TargetError(f"{shown}: cannot read {real}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise TargetError(f"{shown} is not a regular file; include a zone file")
            if not Path(os.readlink(f"/proc/self/fd/{fd}")).is_relative_to(self.root):
                raise TargetError(outside)                         # moved out while it was being opened
            key = (info.st_dev, info.st_ino)
            self.check_nesting(key, stack, shown)
            raw = fh.read(self.limit - self.size + 1)
        self.size += len(raw)
        if self.size > self.limit:
            raise TargetError(f"{shown}: with its includes the zone file has more than {self.limit} bytes; "
                              "use a smaller sample")
        try:
            return real, key, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TargetError(f"{shown}: {real} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None

    def check_nesting(self, key: Key, stack: tuple[Key, ...], shown: str) -> None:
        """TargetError for a file already being included (a cycle), too deep a nesting or too many files."""
        if key in stack:
            raise TargetError(f"{shown} includes a file that is already being included (a cycle); remove the "
                              "$INCLUDE that closes the cycle")
        if len(stack) > MAX_INCLUDE_DEPTH:
            raise TargetError(f"{shown} nests includes deeper than {MAX_INCLUDE_DEPTH} levels; flatten them")
        self.includes += 1
        if self.includes > MAX_INCLUDES:
            raise TargetError(f"{shown}: the zone file includes more than {MAX_INCLUDES} files; merge them")


def _refuse_hidden_directive(line: str, at_directive: bool, where: str) -> None:
    """TargetError for an ``$INCLUDE``/``$ORIGIN`` a server might read where this scanner would not."""
    chunks = _OTHER_BREAKS.split(line) if _OTHER_BREAKS.search(line) else [line]
    hidden = [chunk for chunk in chunks[1:] if _GUARDED.match(chunk)]
    if hidden or (_GUARDED.match(line) and not (at_directive and line[:1] == "$")):
        raise TargetError(f"{where}: $INCLUDE and $ORIGIN must stand in the first column of a line of their own, "
                          "outside parentheses and quotes and after no carriage return or form feed; move it there")
