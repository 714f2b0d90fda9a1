"""Code locations: the line of a stack an engineer would open.

A **code location** is the innermost frame in the user's own code (not the standard library, not an
installed package, not torch or numpy). Reading a stack from the inside out, the library frames under that
location name what the time is spent on (``mechanisms``): a function of the user's called ``read`` is a
location, never storage.
"""

from __future__ import annotations

import re
import sys
from functools import lru_cache

from gpuwatch.model.stacks import Frame, ThreadStack

#: Paths that are not the user's own code: the standard library, installed packages, the frameworks.
#: The standard library and the interpreter's own pseudo-files.
STDLIB = re.compile(r"/lib/python\d[\d.]*/(?!site-packages/|dist-packages/)|^<frozen|^<string>")
#: Installed packages: the user's code when nothing closer is theirs (an application installed with pip).
PACKAGES = re.compile(r"site-packages/|dist-packages/")
#: The frameworks a thread's time is spent *in*, never the code location an engineer would open.
FRAMEWORKS = re.compile(r"(^|/)(torch|torchvision|numpy|scipy|triton|jax|cupy|tokenizers|PIL|cv2|_pytest)/")


def stdlib_file(file: str) -> bool:
    """A standard-library file, by its full path or by the short path a sampler gives relative to
    ``sys.path`` (``subprocess.py``, ``multiprocessing/connection.py``): its first component names a
    standard-library module."""
    if STDLIB.search(file):
        return True
    return not file.startswith("/") and file.split("/", 1)[0].removesuffix(".py") in sys.stdlib_module_names


def user_frame(f: Frame) -> bool:
    """A frame of the user's own code: Python, not the standard library, an installed package or a framework."""
    return not f.native and bool(f.file) and not stdlib_file(f.file) and not PACKAGES.search(f.file) \
        and not FRAMEWORKS.search(f.file)


def _application_frame(f: Frame) -> bool:
    """Python code of an installed application (not the standard library, not a framework)."""
    return not f.native and bool(f.file) and not stdlib_file(f.file) and not FRAMEWORKS.search(f.file)


#: A native frame py-spy could not name: an address in a library (``libc.so.6:0x7f9ac2c2a1ca``) opens nothing.
BARE_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")


def _python_frame(f: Frame) -> bool:
    return not f.native and bool(f.file)


def _named_frame(f: Frame) -> bool:
    return not BARE_ADDRESS.match(f.function)


@lru_cache(maxsize=4096)
def location(stack: ThreadStack) -> str | None:
    """The innermost frame of the user's own code, ``file.py:function``; else of an installed application
    (a program installed with pip runs from site-packages); else the innermost Python frame (the standard
    library or a framework: still a line to open); else the innermost named native frame; else the innermost
    frame (a bare address is the last resort)."""
    for pick in (user_frame, _application_frame, _python_frame, _named_frame):
        for f in stack.frames:
            if pick(f):
                return f.label()
    return stack.frames[0].label() if stack.frames else None
