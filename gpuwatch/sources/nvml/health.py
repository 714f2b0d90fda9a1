"""The health fields of one GPU through NVML: remapped rows, PCIe replays, memory (HBM) temperature, NVLink
state and throughput, fan, encoder/decoder utilisation (XID errors come from :mod:`.health_worker`).

Read on the health worker's cadence (every 10 s by default), never on the sampler's tick. Each field is
handled alone: NotSupported, NoPermission or a function the driver or binding lacks leaves that one field
absent (None), logged once at INFO, and NVML is not asked for it again.
"""

from __future__ import annotations

import logging
from typing import Any

from gpuwatch.sources.nvml.device import Device, once
from gpuwatch.sources.nvml.getters import Getter, Values, _field

log = logging.getLogger(__name__)

#: c_nvmlValue_t member holding a field value of each nvmlValueType_t.
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
KIB = 1024


def _remapped_rows(r: Any, v: Values) -> None:
    corrected, uncorrected, pending, failure = r
    v["remapped_rows_correctable"] = int(corrected)
    v["remapped_rows_uncorrectable"] = int(uncorrected)
    v["row_remap_pending"] = bool(pending)
    v["row_remap_failure"] = bool(failure)


def _engine(name: str) -> Any:
    def apply(r: Any, v: Values) -> None:
        v[name] = float(r[0])  # [utilisation %, sampling period µs]

    return apply


def field_value(fv: Any) -> float | int | None:
    """The number in one ``c_nvmlFieldValue_t`` (None for a type NVML did not say)."""
    member = _VALUE_MEMBER.get(int(fv.valueType))
    return None if member is None else getattr(fv.value, member)


class HealthReader:
    """The health getters of one GPU, with what NVML said it will not answer remembered per field."""

    #: (key, pynvml function, apply): the plain getters, in the order they are called.
    PLAIN = (
        ("remapped_rows", "nvmlDeviceGetRemappedRows", _remapped_rows),
        ("pcie_replays", "nvmlDeviceGetPcieReplayCounter", _field("pcie_replays", cast=int)),
        ("fan_speed", "nvmlDeviceGetFanSpeed", _field("fan_speed_percent")),
        ("encoder_util", "nvmlDeviceGetEncoderUtilization", _engine("encoder_util")),
        ("decoder_util", "nvmlDeviceGetDecoderUtilization", _engine("decoder_util")),
    )

    def __init__(self, nvml: Any, device: Device) -> None:
        self.nvml = nvml
        self.device = device
        self._said: set[str] = set()
        self.getters: list[Getter] = []
        for key, name, apply in self.PLAIN:
            fn = getattr(nvml, name, None)
            if fn is None:
                self._absent(key, f"this nvidia-ml-py has no {name}")
            else:
                self.getters.append(Getter(key, fn, (), apply))
        fields_fn = getattr(nvml, "nvmlDeviceGetFieldValues", None)
        self._fields = None if fields_fn is None else once("field_values", fields_fn)
        self._mem_temp: int | None = getattr(nvml, "NVML_FI_DEV_MEMORY_TEMP", None)
        tx_id = getattr(nvml, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", None)
        rx_id = getattr(nvml, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", None)
        self._nvlink_bytes: tuple[int, int] | None = None if tx_id is None or rx_id is None else (tx_id, rx_id)
        state_fn = getattr(nvml, "nvmlDeviceGetNvLinkState", None)
        self._link_state = None if state_fn is None else once("nvlink_state", state_fn)
        #: Link numbers this GPU has (found on the first read); empty: no NVLink.
        self.links: list[int] | None = None
        if self._fields is None:
            self._absent("memory_temperature", "this nvidia-ml-py has no nvmlDeviceGetFieldValues")

    def _absent(self, key: str, why: str) -> None:
        if key not in self._said:
            self._said.add(key)
            log.info("GPU %d: %s not available (%s); left out", self.device.index, key.replace("_", " "), why)

    def read(self) -> Values:
        """Every health field this GPU answers. Raises GpuLost / NeedsReinit / NvmlBackendError as
        :meth:`Device.read` does; the caller skips this GPU for the round."""
        values: Values = {}
        self.device.read(self.getters, values)
        for g in self.getters:
            if g.off is not None:
                self._absent(g.key, g.off)
        up = self._read_links(values)
        self._read_fields(values, up)
        return values

    # -- NVLink --------------------------------------------------------------------------------------------
    def _read_links(self, values: Values) -> list[int]:
        """Link states; the links that are up (their throughput is read with the field values)."""
        g = self._link_state
        if g is None:
            return []
        if self.links is None:
            self.links = self._probe_links(g)
            if self.links is None:
                return []  # no clear answer yet: probe again at the next read
            if not self.links:
                self._absent("nvlink", "the GPU has no NVLink")
        if not self.links:
            return []
        up = []
        for link in self.links:
            state = self.device.call(Getter(g.key, g.fn, (link,), g.apply))
            if state is None:
                return []  # a link that did not answer: no half-true count this round
            if int(state) == int(self.nvml.NVML_FEATURE_ENABLED):
                up.append(link)
        values["nvlink_links"] = len(self.links)
        values["nvlink_links_up"] = len(up)
        return up

    def _probe_links(self, g: Getter) -> list[int] | None:
        """The GPU's link numbers: up to the first link NVML refuses (NotSupported: no NVLink; InvalidArgument:
        past the last link). None when link 0 failed with an error that may pass: probe again next read."""
        nvml = self.nvml
        final = {getattr(nvml, name, None) for name in (
            "NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_NO_PERMISSION", "NVML_ERROR_INVALID_ARGUMENT",
            "NVML_ERROR_FUNCTION_NOT_FOUND")}
        links: list[int] = []
        for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
            try:
                g.fn(self.device.handle, link)
            except self.device.catch as exc:
                if links or getattr(exc, "value", None) in final:
                    break
                self.device.policy.raise_for_backend(exc)  # a lost GPU, NVML gone: the worker skips the GPU
                return None
            links.append(link)
        return links

    # -- field values: memory temperature, NVLink bytes ---------------------------------------------------
    def _read_fields(self, values: Values, up: list[int]) -> None:
        g = self._fields
        if g is None or g.off is not None:
            return
        ids: list[Any] = []
        if self._mem_temp is not None:
            ids.append(self._mem_temp)
        if self._nvlink_bytes is not None:
            ids += [(fid, link) for link in up for fid in self._nvlink_bytes]
        if not ids:
            return
        g.args = (ids,)
        result = self.device.call(g)
        if g.off is not None:
            self._absent("memory_temperature", g.off)
        if result is None:
            return
        ok = int(self.nvml.NVML_SUCCESS)
        tx = rx = 0
        link_bytes_ok = bool(up)
        for fv in result:
            fid, status, number = int(fv.fieldId), int(fv.nvmlReturn), field_value(fv)
            if fid == self._mem_temp:
                if status == ok and number is not None:
                    values["memory_temperature_c"] = float(number)
                else:
                    self._field_failed("memory_temperature", status)
            elif status != ok or number is None:
                link_bytes_ok = False
                self._field_failed("nvlink_throughput", status)
            elif self._nvlink_bytes is not None and fid == self._nvlink_bytes[0]:
                tx += int(number) * KIB
            else:
                rx += int(number) * KIB
        if link_bytes_ok:
            values["nvlink_tx_bytes"] = tx
            values["nvlink_rx_bytes"] = rx

    def _field_failed(self, key: str, status: int) -> None:
        """A field NVML will never answer is dropped from the next reads; any other code is missing once."""
        if status not in (int(self.nvml.NVML_ERROR_NOT_SUPPORTED), int(self.nvml.NVML_ERROR_NO_PERMISSION)):
            return
        self._absent(key, f"NVML return code {status}")
        if key == "memory_temperature":
            self._mem_temp = None
        else:
            self._nvlink_bytes = None
