"""A file written beside its target and renamed over it (an export, make-npz's .npz, the saved weights, the window's
settings): which file is replaced, the temporary file's name, its permissions, and whether the target's own name can
be made. Stdlib only.

A symlink is never replaced by the rename: the file it names is (dotfiles kept in a repository and linked into
place stay linked, and the repository's file is the one updated).

The temporary is named after the target (".NAME.TAG"), and a file system takes names of at most NAME_MAX bytes
(255 on Linux's): a target whose own name is near that limit is shortened in its temporary's name, so a name the
file system takes is never refused for the temporary's sake. The rename gives the target the temporary's
permissions: a file replaced keeps its own (a private 0600 file stays private).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Optional

NAME_MAX_FALLBACK = 255  # Linux's, macOS's and Windows' limit, where the folder cannot be asked


def replaced_file(path: Path) -> Path:
    """The file a write-and-rename at ``path`` replaces: a symlink's target, followed to its end (the temporary is
    made beside it and renamed over it, and the link stays); ``path`` itself, made absolute, otherwise. A dangling
    link's target is the file made."""
    return Path(os.path.realpath(path))


def temporary_beside(target: Path, tag: str) -> Path:
    """A hidden name beside ``target`` for the file that will be renamed over it: ``.NAME.TAG``, with NAME cut
    (at a character) as far as the folder's limit on a name needs; ``tag`` ("1a2b.tmp", "1234.partial") is kept
    whole, so what it says and any suffix a writer needs (".npz") stay."""
    room = name_max(target.parent) - len(os.fsencode(f"..{tag}"))
    name = target.name
    while name and len(os.fsencode(name)) > room:
        name = name[:-1]
    return target.with_name(f".{name}.{tag}")


def created_temporary_beside(target: Path, suffix: str = "tmp") -> Path:
    """A new, empty file beside ``target`` (``temporary_beside`` with a random tag, ``.NAME.1a2b3c4d.tmp``) to be
    written and renamed over it. Made with mode 0o666, so the umask decides a new target's permissions as for any
    new file (``tempfile``'s files are 0o600, which the rename would keep); ``keep_permissions`` then gives it a
    replaced file's own. OSError where it cannot be made."""
    for _ in range(100):
        temporary = temporary_beside(target, f"{secrets.token_hex(4)}.{suffix}")
        try:
            os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return temporary
    raise FileExistsError(errno.EEXIST, f"no free temporary file name in {target.parent}")


def keep_permissions(target: Path, temporary: Path) -> None:
    """Give ``temporary``, written, the permission bits of the regular file at ``target`` it is about to replace;
    a new target keeps what the umask gave it, as any new file. OSError where the temporary cannot take them."""
    try:
        found = os.stat(target)
    except OSError:
        return  # none there yet (or none to be read): the write itself says what is wrong
    if stat.S_ISREG(found.st_mode):
        os.chmod(temporary, stat.S_IMODE(found.st_mode) & 0o777)  # never a set-id bit on a file the workbench made


def name_length_problem(target: Path) -> Optional[str]:
    """Why no file can have ``target``'s name in its folder (past the file system's limit on a name), in words
    that follow "cannot be written: "; None when it can."""
    length, limit = len(os.fsencode(target.name)), name_max(target.parent)
    if length <= limit:
        return None
    return f"its name is {length:,} bytes long, and its folder takes names of at most {limit:,} bytes"


def name_max(folder: Path) -> int:
    """The longest name, in bytes, that ``folder``'s file system takes."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # no such folder (the write says why), no pathconf (Windows)
        return NAME_MAX_FALLBACK
