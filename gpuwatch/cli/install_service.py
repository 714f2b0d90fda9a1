"""``gpuwatch install-service``: a hardened systemd unit for the daemon, printed or (``--write``) installed.

Everything that would make the unit fail to start is checked first: the address (a remote one gets
``--allow-remote`` and a token), the watchdog, and whether the sandboxed dynamic user can read this
gpuwatch at all. The unit itself is in :mod:`gpuwatch.cli.service_unit`.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import stat
import sys
from pathlib import Path

from gpuwatch.cli import service_paths
from gpuwatch.cli.common import CliError
from gpuwatch.cli.paths import input_file, output_file
from gpuwatch.cli.service_unit import UnitSpec, exec_quote, render_unit
from gpuwatch.config import DEFAULT_LISTEN
from gpuwatch.config.fields import FieldError, is_loopback, listen_address
from gpuwatch.model import files

UNIT_PATH = Path("/etc/systemd/system/gpuwatch.service")
TOKEN_PATH = Path("/etc/gpuwatch/token")
MAX_WATCHDOG_S = 3600


def gpuwatch_command() -> tuple[str, ...]:
    """The installed ``gpuwatch`` entry point (absolute: systemd needs it), else ``python -m gpuwatch``."""
    beside = Path(sys.executable).parent / "gpuwatch"
    if beside.exists():
        return (str(beside),)
    found = shutil.which("gpuwatch")
    return (os.path.abspath(found),) if found else (sys.executable, "-m", "gpuwatch")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("install-service", help="print (or --write) a hardened systemd unit for the daemon",
                       description="Print a systemd unit that runs 'gpuwatch daemon' as a dynamic user with "
                       "Type=notify, a watchdog, its outbox in /var/lib/gpuwatch and access to the NVIDIA "
                       "devices only. A non-loopback --listen gets --allow-remote and a bearer token "
                       f"(--write creates {TOKEN_PATH}, mode 0600). With --write, install it (as root) and "
                       "print the commands that start it.")
    p.add_argument("--write", action="store_true", help=f"write the unit to --path (default {UNIT_PATH})")
    p.add_argument("--path", type=output_file, default=UNIT_PATH, metavar="FILE", help="where --write puts the unit")
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                   help=f"address the daemon serves on (default {DEFAULT_LISTEN})")
    p.add_argument("--watchdog", type=int, default=30, metavar="S",
                   help=f"WatchdogSec in seconds, 1-{MAX_WATCHDOG_S}; 0 turns the watchdog off (default 30)")
    p.add_argument("--token-file", type=input_file, default=TOKEN_PATH, metavar="FILE",
                   help=f"for a remote --listen: the root-only token file the unit hands the daemon "
                   f"(default {TOKEN_PATH}; --write creates it when missing)")
    p.add_argument("--exec", dest="exec_path", type=input_file, metavar="PATH",
                   help="the gpuwatch the unit runs (default: this one)")
    p.add_argument("--stacks", action="store_true",
                   help="grant the daemon CAP_SYS_PTRACE so py-spy can sample the stacks of the processes on an "
                   "under-used GPU (the doctor's evidence; systemd's exposure score rises by 0.3)")
    p.add_argument("--force", action="store_true",
                   help="write the unit even where the service's user could not read that gpuwatch")
    p.set_defaults(func=run)


def _check_listen(text: str) -> str:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise CliError(f"--listen {text!r}: control characters (a newline?) are not allowed", exit_code=2)
    try:
        host, port = listen_address(text)
    except FieldError as exc:
        raise CliError(f"--listen: {exc}", exit_code=2) from None
    if port == 0:
        raise CliError("--listen: a service needs a fixed port, not 0", exit_code=2)
    return host


def _spec(args: argparse.Namespace) -> UnitSpec:
    host = _check_listen(args.listen)
    if not 0 <= args.watchdog <= MAX_WATCHDOG_S:
        raise CliError(f"--watchdog {args.watchdog}: give 1-{MAX_WATCHDOG_S} seconds, or 0 for no watchdog",
                       exit_code=2)
    command = (str(args.exec_path.absolute()),) if args.exec_path else gpuwatch_command()
    remote = not is_loopback(host)
    token = str(args.token_file.absolute()) if remote else None
    try:
        for part in (*command, token or ""):
            exec_quote(part)
    except ValueError as exc:
        raise CliError(f"cannot put {exc} into a unit", exit_code=2) from None
    return UnitSpec(command, args.listen, args.watchdog, token, stacks=args.stacks)


def _ensure_token(path: Path) -> str:
    """Create the token file (0600, root's) when missing; check an existing one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        mode = stat.S_IMODE(path.stat().st_mode)
        try:  # a regular file, read up to a token's size: a FIFO or /dev/zero here must not hang or fill memory
            kept = files.read_text(path, 64 * 1024)
        except (OSError, UnicodeDecodeError) as exc:
            why = files.describe(exc) if isinstance(exc, OSError) else "not UTF-8 text"
            raise CliError(f"{path}: cannot read the token file ({why}); pass another --token-file") from None
        if len(kept.strip()) < 16:
            raise CliError(f"{path}: the token is shorter than 16 characters; remove it and run again") from None
        return f"kept the token in {path}" + (f" (mode {mode:04o}: 'chmod 600 {path}')" if mode & 0o077 else "")
    except OSError as exc:
        raise CliError(f"cannot create {path}: {exc.strerror} (run as root, or pass --token-file)") from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(secrets.token_urlsafe(32) + "\n")
    return f"wrote a new token to {path} (mode 0600)"


def run(args: argparse.Namespace) -> int:
    spec = _spec(args)
    found = service_paths.problems(service_paths.runtime_paths(Path(spec.command[0])))
    unit = render_unit(spec)
    if not args.write:
        sys.stdout.write(unit)
        for why in found:
            print(f"warning: the service could not start: {why}", file=sys.stderr)
        if found:
            print(f"fix: {service_paths.FIX}", file=sys.stderr)
        if spec.token_source:
            print(f"note: the unit reads its token from {spec.token_source} (create it, mode 0600, or use --write)",
                  file=sys.stderr)
        return 0
    if found and not args.force:
        raise CliError(f"not writing a unit that cannot start: {'; '.join(found)}. Fix: {service_paths.FIX}")
    token_note = _ensure_token(Path(spec.token_source)) if spec.token_source else ""
    try:
        args.path.parent.mkdir(parents=True, exist_ok=True)
        args.path.write_text(unit, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {args.path}: {exc.strerror} (run as root, or print the unit without "
                       f"--write and install it yourself)") from None
    print(f"wrote {args.path}")
    if token_note:
        print(token_note)
    curl = f"curl -s http://{args.listen}/metrics | head"
    if spec.token_source:
        curl = f"curl -s -H \"Authorization: Bearer $(cat {spec.token_source})\" http://{args.listen}/metrics | head"
        print(f"Prometheus sends it with: authorization: {{credentials_file: {spec.token_source}}} "
              f"(a copy it can read)")
    print(f"start it with:\n  systemctl daemon-reload && systemctl enable --now {args.path.name}\nthen: {curl}")
    return 0
