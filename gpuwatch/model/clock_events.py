"""Clock-event ("throttle") reason bits, decoded the way NVML, DCGM and dcgm-exporter name them.

Bits from nvml.h; names match dcgm-exporter's ``clock_event`` label so the same word means the same thing
in the TUI, on /metrics and in alert rules.
"""

from __future__ import annotations

#: bit -> (name, what it means to someone paged at night)
CLOCK_EVENT_BITS: dict[int, tuple[str, str]] = {
    0x1: ("gpu_idle", "nothing is running; clocks are dropping to idle"),
    0x2: ("clocks_setting", "held by the applications-clocks setting"),
    0x4: ("power_cap", "software power capping holds clocks under the power limit"),
    0x8: ("hw_slowdown", "hardware slowdown (thermal, power brake or fast power trigger) cut clocks ≥2x"),
    0x10: ("sync_boost", "held to the slowest GPU of a sync-boost group"),
    0x20: ("sw_thermal", "software thermal slowdown keeps GPU or memory under max operating temperature"),
    0x40: ("hw_thermal", "hardware thermal slowdown: the GPU is too hot"),
    0x80: ("hw_power_brake", "external power brake asserted (e.g. the system PSU)"),
    0x100: ("display_clocks", "held by the display clock setting"),
}

NAME_TO_BIT = {name: bit for bit, (name, _) in CLOCK_EVENT_BITS.items()}

#: Reasons that mean the GPU is slowed down against the user's wishes.
THROTTLE_REASONS = frozenset({"power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake", "sync_boost"})
#: Reasons shown in warning colours and treated as severe.
SEVERE_REASONS = frozenset({"hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"})


def decode(mask: int | None) -> tuple[str, ...]:
    """Names of the set bits, low bit first; unknown bits appear as ``bit_0x200``."""
    if not mask:
        return ()
    names = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            names.append(CLOCK_EVENT_BITS[bit][0] if bit in CLOCK_EVENT_BITS else f"bit_{bit:#x}")
        bit <<= 1
    return tuple(names)


def ordered(names: frozenset[str] | set[str]) -> tuple[str, ...]:
    """``names`` low bit first (the order NVML documents them), unknown names after, alphabetically."""
    return tuple(sorted(names, key=lambda n: (NAME_TO_BIT.get(n, 1 << 62), n)))


def encode(names: tuple[str, ...] | list[str]) -> int:
    mask = 0
    for n in names:
        if n in NAME_TO_BIT:
            mask |= NAME_TO_BIT[n]
        elif n.startswith("bit_0x"):
            mask |= int(n[4:], 16)
    return mask
