"""``gpuwatch daemon``: Prometheus endpoint, JSON/stream API, alert rules and signed webhooks."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import tempfile
from typing import TYPE_CHECKING

from gpuwatch.cli.common import CliError, add_sampling_args, open_options, options_from_args
from gpuwatch.cli.paths import input_file, input_file_name, output_dir_name
from gpuwatch.config import (
    DEFAULT_LISTEN,
    Config,
    ConfigError,
    check_listen,
    default_config_path,
    load_config,
    override,
)
from gpuwatch.config.example import render_example
from gpuwatch.daemon.parts import StartError, build_rules, build_targets, no_rules_warning, read_token, state_dir
from gpuwatch.model.visible import visible

if TYPE_CHECKING:
    from gpuwatch.daemon.runner import Daemon
    from gpuwatch.runtime.build import SamplingOptions

DESCRIPTION = f"""\
Sample the GPUs (or play --replay FILE), evaluate the alert rules, deliver signed webhooks from a durable
outbox, and serve on http://{DEFAULT_LISTEN} (the default; change it with --listen or [daemon] listen):

  /metrics            Prometheus exposition (gpuwatch_* series, built per scrape)
  /healthz            200 while snapshots flow
  /api/v1/snapshot    latest snapshot (JSON)      /api/v1/stream     one snapshot per line (NDJSON)
  /api/v1/alerts      pending/firing alerts       /api/v1/diagnosis  the doctor's findings
  POST /api/v1/reload re-read config and rules (Authorization: Bearer TOKEN); SIGHUP does the same

Config: {default_config_path()} (or --config FILE; GPUWATCH_<SECTION>_<KEY> variables override it).
A non-loopback --listen needs --allow-remote and a token file; there, reads (all but /healthz) need the
token too unless [daemon] token_for_reads = false. Prometheus sends it with authorization: credentials_file."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("daemon", help="serve /metrics and the API, evaluate alerts, send webhooks",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", type=input_file, metavar="FILE", help="TOML config file (default: the XDG path above)")
    p.add_argument("--listen", metavar="HOST:PORT", help=f"address to serve on (default {DEFAULT_LISTEN})")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --listen address (a token file is then required)")
    p.add_argument("--token-file", type=input_file_name, metavar="FILE",
                   help="bearer token for state-changing requests")
    p.add_argument("--state-dir", type=output_dir_name, metavar="DIR",
                   help="where the notification outbox and the GPU-hour roll-ups live (a --replay without it, or "
                        "[daemon] state_dir, writes to a throwaway directory, never the live state)")
    p.add_argument("--check-config", action="store_true",
                   help="validate the config, rules and secrets, print a summary and exit")
    p.add_argument("--print-config", action="store_true",
                   help="print a documented example config (all defaults) and exit")
    add_sampling_args(p)
    p.set_defaults(func=run, interval=None)


def _configure(args: argparse.Namespace) -> Config:
    config = load_config(args.config)
    config = override(config, "daemon", listen=args.listen, token_file=args.token_file, state_dir=args.state_dir,
                      allow_remote=True if args.allow_remote else None)
    config = override(config, "sampler", interval=args.interval)
    return override(config, "sources", dcgm_url=args.dcgm)


#: The daemon asks NVML for per-process utilisation this often (the dashboard every 5 s): a Prometheus scraping
#: every 15 s still sees a new value at each scrape, and the doctor and the GPU-hour accounting judge 30 s windows.
#: At ~2 ms of CPU a query on an H200 this saves about 0.27 ms a second, a twentieth of the daemon's CPU.
DAEMON_PROCESS_UTIL_S = 15.0


def options_from_config(config: Config, args: argparse.Namespace) -> SamplingOptions:
    """The daemon's road: its flags went into the Config (``_configure``); what to sample comes from there."""
    return dataclasses.replace(options_from_args(args), interval=config.sampler.interval,
                               history_s=config.sampler.history,
                               dcgm_url=config.sources.dcgm_url,
                               kubelet_socket=config.sources.kubelet_socket or None,
                               kubelet_interval=config.sources.kubelet_interval,
                               stacks=config.sources.stacks and not getattr(args, "no_stacks", False),
                               process_util_period=max(DAEMON_PROCESS_UTIL_S, config.sampler.interval),
                               skip_bundled_idle=True)  # the demo starts where the dashboard's does


def _check(config: Config) -> int:
    rules = build_rules(config)
    build_targets(config)
    check_listen(config, read_token(config))
    print(visible(f"config {config.path or '(defaults)'}: OK; listen {config.daemon.listen}, {len(rules)} "
                  f"rule(s), {len(config.receivers)} receiver(s), outbox in {state_dir(config)}"))
    warning = no_rules_warning(rules, config)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.print_config:
        sys.stdout.write(render_example())
        return 0
    try:
        config = _configure(args)
        if args.check_config:
            return _check(config)
    except ConfigError as exc:
        raise CliError(str(exc), exit_code=2) from None
    except StartError as exc:
        raise CliError(str(exc), exit_code=2) from None
    # the daemon's parts (asyncio, the HTTP server, the sampler) are imported only to serve: --check-config and
    # a flag error answer without paying their start-up
    import asyncio

    from gpuwatch.daemon.runner import Daemon
    from gpuwatch.runtime import memory

    if args.verbose == 0:
        logging.getLogger("gpuwatch").setLevel(logging.INFO)
    memory.tune_allocator()  # before the sources open and start their threads
    opened = open_options(options_from_config(config, args))
    throwaway = _replay_state(config) if opened.is_recording else None
    try:
        daemon = Daemon(_state_in(config, throwaway), opened.sampler, opened.description, opened.is_recording,
                        reload_config=lambda: _state_in(_configure(args), throwaway))
        return asyncio.run(_serve(daemon))
    except StartError as exc:
        opened.producer.close()
        raise CliError(str(exc), exit_code=2) from None
    finally:
        if throwaway is not None:
            throwaway.cleanup()


async def _serve(daemon: Daemon) -> int:
    """The daemon, with the allocator's free pages handed back once it has settled and then now and then."""
    import asyncio

    from gpuwatch.runtime import memory

    releaser = memory.Releaser()
    releaser.start(asyncio.get_running_loop())
    try:
        return await daemon.run()
    finally:
        releaser.stop()


def _replay_state(config: Config) -> tempfile.TemporaryDirectory[str] | None:
    """A replay's state goes to a throwaway directory unless one is named (--state-dir, [daemon] state_dir):
    a recording's GPU-hours and alerts must never land in the live outbox and roll-ups that a daemon on real
    GPUs reads and reports (the default state directory, systemd's $STATE_DIRECTORY)."""
    if config.daemon.state_dir:
        return None
    tmp = tempfile.TemporaryDirectory(prefix="gpuwatch-replay-state-")
    logging.getLogger("gpuwatch").info("replaying a recording: its outbox and GPU-hour roll-ups go to %s (removed "
                                       "on exit), not the live state directory; --state-dir DIR keeps them", tmp.name)
    return tmp


def _state_in(config: Config, throwaway: tempfile.TemporaryDirectory[str] | None) -> Config:
    return config if throwaway is None else override(config, "daemon", state_dir=throwaway.name)
