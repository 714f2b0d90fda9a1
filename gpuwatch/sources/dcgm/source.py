"""The DCGM source: scrape a dcgm-exporter /metrics page over HTTP and hand the sampler its GPUs.

Failure policy: ``poll`` raises :class:`DcgmError` with one short line (what failed, where) and the
sampler marks the source ``error`` with that line while every other source goes on; the GPUs keep their
identity in the Snapshot, without values, until a scrape succeeds again. After a failure the source backs
off (1 s, 2 s, 4 s ... capped at 30 s): polls inside the back-off window raise at once with the last
reason and the time of the next try, so a dead exporter is not hammered once per tick. The first scrape
that succeeds resets the back-off: the source recovers by itself.

Every scrape is bounded: connect and per-read timeouts, a whole-body deadline (a server that drips one
byte at a time never trips a per-read timeout), and a size cap (a runaway body is cut off at
``max_bytes``, decompressed size). Bodies are read with urllib3's ``read1``, which returns what has
arrived; ``iter_content(n)`` waits for ``n`` bytes and would sit out a slow drip.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

import requests
import urllib3.exceptions

from gpuwatch.model.snapshot import MIB
from gpuwatch.sources.base import Reading, Source
from gpuwatch.sources.dcgm.convert import to_gpu_samples
from gpuwatch.sources.dcgm.deadline import DeadlineAdapter
from gpuwatch.sources.dcgm.parse import DcgmParseError, parse_body

_CHUNK = 64 * 1024
#: An exporter page reached through more redirects than this is refused.
MAX_REDIRECTS = 3


class DcgmError(RuntimeError):
    """One scrape failed (or is being held back after failures); the message is one line for the status."""


def check_url(url: str) -> str:
    """``url`` if it can name a dcgm-exporter page, else ValueError saying what one looks like."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"a dcgm-exporter URL looks like http://node:9400/metrics, got '{url}'")
    return url


class DcgmSource(Source):
    """GPUs as a dcgm-exporter sees them, in the model's units (see :mod:`gpuwatch.sources.dcgm.fields`)."""

    name = "dcgm"
    role = "gpu"

    def __init__(self, url: str, *, connect_timeout: float = 1.0, read_timeout: float = 2.0,
                 total_timeout: float | None = None, max_bytes: int = 8 * MIB, backoff_initial: float = 1.0,
                 backoff_max: float = 30.0, jitter: float = 0.1, session: requests.Session | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.url = check_url(url)
        self.where = urlsplit(url).netloc
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        #: Longest a whole scrape may take, headers to last byte.
        self.total_timeout = total_timeout if total_timeout is not None else connect_timeout + read_timeout
        self.max_bytes = max_bytes
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.jitter = jitter
        # The sampler stops waiting a little after the scrape's own deadline would have fired.
        self.deadline_s = self.total_timeout + 0.5
        self._session = session or requests.Session()
        self._session.max_redirects = MAX_REDIRECTS
        self._adapter = DeadlineAdapter(max_retries=0)
        self._session.mount("http://", self._adapter)
        self._session.mount("https://", self._adapter)
        # The classic text format: what prometheus_client's parser reads (not protobuf, not OpenMetrics).
        self._session.headers.update({"User-Agent": "gpuwatch", "Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1"})
        self._clock = clock
        self.failures = 0
        self._retry_at = 0.0
        self._last_error: str | None = None

    # -- Source -------------------------------------------------------------------------------------------
    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        wait = self._retry_at - self._clock()
        if self.failures and wait > 0:
            raise DcgmError(f"{self._last_error}; next try in {wait:.1f} s")
        try:
            gpus = to_gpu_samples(parse_body(self.fetch()))
        except DcgmError as exc:
            self._failed(str(exc))
            raise DcgmError(str(exc)) from None
        except DcgmParseError as exc:  # which exporter sent the page: there may be several
            self._failed(f"{self.where}: {exc}")
            raise DcgmError(f"{self.where}: {exc}") from None
        except Exception as exc:  # anything else a strange page causes: the same back-off, one line
            self._failed(f"{self.where}: unreadable page ({type(exc).__name__}: {str(exc)[:120]})")
            raise DcgmError(self._last_error or "") from None
        self.failures, self._last_error = 0, None
        return Reading(gpus=gpus)

    def close(self) -> None:
        self._session.close()

    # -- HTTP ---------------------------------------------------------------------------------------------
    def fetch(self) -> str:
        """The body of one scrape, or :class:`DcgmError` saying what went wrong in one line."""
        started = time.monotonic()  # real time, whatever clock paces the back-off
        # A little later than the body loop's own check, which says how far the page got.
        with self._adapter.deadline(self.total_timeout + 0.2) as cut:
            try:
                body = self._fetch(started)
            except DcgmError:
                if not cut.is_set():
                    raise
        if cut.is_set():  # whatever the interrupted read made of it (an error, a truncated page): too slow
            raise DcgmError(f"{self.where} took over {self.total_timeout:g} s to answer; gave up")
        return body

    def _fetch(self, started: float) -> str:
        try:
            with self._session.get(self.url, stream=True,
                                   timeout=(self.connect_timeout, self.read_timeout)) as resp:
                if resp.status_code != 200:
                    raise DcgmError(f"{self.where} answered HTTP {resp.status_code} {resp.reason or ''}".rstrip())
                body = self._read_capped(resp, started)
        except requests.exceptions.TooManyRedirects:
            raise DcgmError(f"{self.where} redirected more than {MAX_REDIRECTS} times") from None
        except requests.exceptions.ConnectTimeout:
            raise DcgmError(f"{self.where} did not accept a connection within {self.connect_timeout:g} s") from None
        except requests.exceptions.ConnectionError as exc:
            raise DcgmError(f"cannot reach {self.where}: {_reason(exc)}") from None
        except requests.exceptions.Timeout:
            raise DcgmError(f"{self.where} sent nothing for {self.read_timeout:g} s") from None
        except (urllib3.exceptions.ProtocolError, requests.exceptions.ChunkedEncodingError):
            raise DcgmError(f"{self.where} closed the connection mid-page") from None
        except (urllib3.exceptions.DecodeError, requests.exceptions.ContentDecodingError):
            raise DcgmError(f"{self.where} sent a body that does not decompress") from None
        except urllib3.exceptions.ReadTimeoutError:  # raised by read1 itself, not wrapped by requests
            raise DcgmError(f"{self.where} stopped sending for {self.read_timeout:g} s mid-page") from None
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise DcgmError(f"scrape of {self.where} failed: {_reason(exc)}") from None
        encoding = resp.encoding if resp.encoding and resp.encoding.lower() != "iso-8859-1" else "utf-8"
        try:
            return body.decode(encoding, errors="replace")
        except LookupError:  # a charset Python does not know: the exporter writes UTF-8 anyway
            return body.decode("utf-8", errors="replace")

    def _read_capped(self, resp: requests.Response, started: float) -> bytes:
        declared = resp.headers.get("Content-Length")
        if declared and declared.isdigit() and int(declared) > self.max_bytes:
            raise DcgmError(f"{self.where} offered a {int(declared) / MIB:.1f} MiB body, over the "
                            f"{self.max_bytes / MIB:.3g} MiB cap")
        read1 = getattr(resp.raw, "read1", None)
        chunks = (iter(lambda: read1(_CHUNK, decode_content=True), b"") if read1 is not None
                  else resp.iter_content(_CHUNK))
        buf = bytearray()
        for chunk in chunks:
            buf += chunk
            if len(buf) > self.max_bytes:
                raise DcgmError(f"{self.where} sent more than the {self.max_bytes / MIB:.3g} MiB cap; stopped reading")
            if time.monotonic() - started > self.total_timeout:
                raise DcgmError(f"{self.where} took over {self.total_timeout:g} s to send the page "
                                f"({len(buf)} bytes so far); gave up")
        return bytes(buf)

    # -- back-off -----------------------------------------------------------------------------------------
    def _failed(self, reason: str) -> None:
        self.failures += 1
        self._last_error = reason
        delay = min(self.backoff_max, self.backoff_initial * 2 ** (self.failures - 1))
        delay *= 1.0 + random.uniform(-self.jitter, self.jitter)
        self._retry_at = self._clock() + delay


def _reason(exc: BaseException) -> str:
    """The innermost, most specific words of a requests/urllib3 error: 'Connection refused', not a repr."""
    text = str(exc)
    for marker in ("Connection refused", "Name or service not known", "No route to host",
                   "Temporary failure in name resolution", "Connection reset by peer", "Remote end closed"):
        if marker in text:
            return marker.lower()
    inner = exc.__context__ or exc.__cause__
    while inner is not None and (inner.__context__ or inner.__cause__) is not None:
        inner = inner.__context__ or inner.__cause__
    words = " ".join(str(inner or exc).split())
    return words if len(words) <= 100 else words[:97] + "..."
