""""Where does X go" is true: for each row of that table in ``docs/architecture.md`` a worked example makes the
change in a copy of the package, touching only the files the row names, and shows it flowing through (a
metric to the rules, ``/metrics`` and ``gpuwatch rules metrics``; a receiver kind from the config to the body
posted; a source to the Snapshot, the alert rules and ``/metrics``; an alert kind from a rule file to the
engine, the PromQL export and the kinds table; a pane to the screen). A row that names too few files fails
its example; one that names a file the example does not need fails the comparison with the table. (The
doctor-class row is only required to be there: its example belongs with the doctor's class table.)"""

from __future__ import annotations

from pathlib import Path

from core.worked_example import table, touched, worked_example


def test_the_table_has_a_row_for_each_kind_of_change() -> None:
    # the doctor's rows (a class, a stack mechanism) are held by tests/doctor/test_class_table.py and
    # test_mechanisms.py: a class added by its table entry alone, a stack of each mechanism classified
    assert set(table()) == {"new metric", "new source", "new alert kind", "new doctor class",
                            "new stack mechanism (what frames mean)", "new pane", "new receiver"}


# -- a metric ------------------------------------------------------------------------------------------------
METRIC_EDITS = {"model/metrics.py": [(
    '''    MetricSpec("gpu.mem_total_bytes",''',
    '''    MetricSpec("gpu.mem_free_bytes", "gpu", "bytes", "device memory not in use",
               lambda g: None if g.mem_total_bytes is None or g.mem_used_bytes is None
               else float(g.mem_total_bytes - g.mem_used_bytes), "gpuwatch_gpu_memory_free_bytes"),
    MetricSpec("gpu.mem_total_bytes",''')]}
METRIC_SCRIPT = '''
    import contextlib, io
    from core.factories import full_snapshot
    from gpuwatch.alerts import AlertEngine, parse_rules
    from gpuwatch.cli.main import main
    from gpuwatch.exporter.gpu import gpu_families
    from gpuwatch.model.series import CATALOGUE

    snap = full_snapshot()
    rule = ("groups:\\n- name: g\\n  rules:\\n  - alert: LowFree\\n    condition: {threshold: "
            "{metric: gpu.mem_free_bytes, op: '>', value: 0}}\\n")
    engine = AlertEngine(parse_rules(rule, "example.yml"))
    print("alert", sorted({t.alert.state for t in engine.evaluate(snap)}))
    print("served", any(f.name == "gpuwatch_gpu_memory_free_bytes" and f.samples for f in gpu_families(snap)))
    print("listed", any(s.name == "gpuwatch_gpu_memory_free_bytes" for s in CATALOGUE))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["rules", "metrics", "--all"])
    print("documented", "gpu.mem_free_bytes" in out.getvalue())
'''


def test_a_new_metric_is_one_spec_in_the_catalogue(tmp_path: Path) -> None:
    out = worked_example(tmp_path, METRIC_EDITS, {}, METRIC_SCRIPT)
    assert out.split("\n")[:4] == ["alert ['firing']", "served True", "listed True", "documented True"]
    assert touched(METRIC_EDITS, {}) == table()["new metric"]


# -- a receiver kind -----------------------------------------------------------------------------------------
RECEIVER_EDITS = {
    "notify/payloads.py": [
        ("BUILDERS: dict[str, Callable[..., Any]] = {", """def chat(receiver: str, group_key: str,
         group_labels: Mapping[str, str], alerts: Sequence[Mapping[str, Any]],
         external_url: str) -> dict[str, Any]:
    return {"say": f"{len(alerts)} alert(s) for {receiver}", "names": [a["labels"]["alertname"] for a in alerts]}


BUILDERS: dict[str, Callable[..., Any]] = {"chat": chat, """),
    ],
    "config/model.py": [('''RECEIVER_KINDS = ("generic",''', '''RECEIVER_KINDS = ("chat", "generic",''')],
}
RECEIVER_SCRIPT = '''
    import asyncio, time
    from pathlib import Path
    from core.factories import full_snapshot
    from notify.receiver import Receiver
    from gpuwatch.alerts import AlertEngine, parse_rules
    from gpuwatch.config.loader import load_config
    from gpuwatch.daemon.parts import build_targets
    from gpuwatch.notify import Deliverer, Notifier, Outbox

    receiver = Receiver()
    env = {"CHAT_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
    Path("gw.toml").write_text(f"""[[receivers]]\\nname = "team"\\nkind = "chat"\\nurl = "{receiver.url}"\\n"""
                               f"""secret_env = "CHAT_SECRET"\\n""")
    config = load_config(Path("gw.toml"), env)
    rule = ("groups:\\n- name: g\\n  rules:\\n  - alert: Hot\\n    condition: {threshold: "
            "{metric: gpu.temperature_c, op: '>', value: 0}}\\n")
    engine = AlertEngine(parse_rules(rule, "example.yml"))
    snap = full_snapshot(time.time())
    outbox = Outbox(Path("outbox.sqlite"))
    Notifier(outbox, config.receivers, "http://gpuwatch.example", 0.0).handle(engine.evaluate(snap),
                                                                               engine.alerts(), snap.time)
    deliverer = Deliverer(outbox, build_targets(config, env), config.notify)

    async def drain():
        stop = asyncio.Event()
        task = asyncio.create_task(deliverer.run(stop))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not receiver.delivered():
            await asyncio.sleep(0.05)
        stop.set()
        await task

    asyncio.run(drain())
    print(receiver.delivered()[0].json()["say"])
    receiver.close()
'''


def test_a_new_receiver_kind_is_its_body_and_its_name(tmp_path: Path) -> None:
    out = worked_example(tmp_path, RECEIVER_EDITS, {}, RECEIVER_SCRIPT)
    assert out.splitlines()[0] == "2 alert(s) for team"  # the two GPUs of the snapshot, in the new body
    assert touched(RECEIVER_EDITS, {}) == table()["new receiver"]


# -- a source ------------------------------------------------------------------------------------------------
SOURCE_NEW = {"sources/rack/__init__.py": '''
    """Which rack each GPU sits in, from a file of ``UUID rack`` lines: a labels source."""

    from __future__ import annotations

    from collections.abc import Sequence
    from pathlib import Path

    from gpuwatch.sources.base import Reading, Source


    class RackSource(Source):
        name = "rack"
        role = "labels"

        def __init__(self, path: str) -> None:
            self.path = Path(path)

        def poll(self, now: float, pids: Sequence[int]) -> Reading:
            pairs = (line.split() for line in self.path.read_text().splitlines() if line.strip())
            return Reading(gpu_labels={uuid: {"rack": rack} for uuid, rack in pairs})
'''}
SOURCE_EDITS = {
    "runtime/build.py": [
        ('''    kubelet_interval: float = 10.0
''', '''    kubelet_interval: float = 10.0
    #: A file of ``UUID rack`` lines (None: no rack labels).
    rack_file: str | None = None
'''),
        ('''    if not opts.kubelet_socket:
        return []''', '''    if opts.rack_file:
        from gpuwatch.sources.rack import RackSource

        return [RackSource(opts.rack_file)]
    if not opts.kubelet_socket:
        return []'''),
    ],
    "alerts/condition_fields.py": [('''SOURCE_NAMES = ("nvml",''', '''SOURCE_NAMES = ("rack", "nvml",''')],
}
SOURCE_SCRIPT = '''
    import sys
    from pathlib import Path
    from fakes.fake_pynvml import make_fake_nvml

    nvml = sys.modules["pynvml"] = make_fake_nvml(gpus=2)  # the NVML a test has; the rest is real
    from gpuwatch.alerts import parse_rules
    from gpuwatch.exporter.collector import _source_families
    from gpuwatch.runtime.build import SamplingOptions, open_sampler

    Path("racks.txt").write_text(f"{nvml.gpus[1].uuid} r7\\n")
    opened = open_sampler(SamplingOptions(rack_file="racks.txt"))
    snap = None
    while snap is None or len(snap.sources) < 3:
        snap = opened.sampler.tick()
    print("status", {s.name: s.state for s in snap.sources}["rack"])
    print("labels", sorted(g.labels.get("rack", "-") for g in snap.gpus))
    rule = "groups:\\n- name: g\\n  rules:\\n  - alert: RackGone\\n    condition: {stale: {source: rack}}\\n"
    print("rule", [r.name for r in parse_rules(rule, "example.yml").rules])
    up = next(f for f in _source_families(snap) if f.name == "gpuwatch_source_up")
    print("metrics", [s.value for s in up.samples if s.labels["source"] == "rack"])
    opened.sampler.producer.close()
'''


def test_a_new_source_is_its_package_where_it_is_opened_and_its_name(tmp_path: Path) -> None:
    out = worked_example(tmp_path, SOURCE_EDITS, SOURCE_NEW, SOURCE_SCRIPT)
    assert out.splitlines()[:4] == ["status ok", "labels ['-', 'r7']", "rule ['RackGone']", "metrics [1.0]"]
    assert touched(SOURCE_EDITS, SOURCE_NEW) == table()["new source"]


# -- an alert kind -------------------------------------------------------------------------------------------
OUTSIDE_DATACLASS = '''@dataclass(frozen=True)
class Outside:
    metric: str
    low: float
    high: float
    kind: str = field(default="outside", init=False)


Condition: TypeAlias = "Outside | Threshold |'''
OUTSIDE_EVAL = '''

class OutsideEval(Evaluator):
    """``metric`` below ``low`` or above ``high``, per entity."""

    def evaluate(self, frame: Frame, active: frozenset[Key] = frozenset()) -> Results:
        c = self.cond
        out: Results = {}
        for key in frame.keys(self.scope):
            v = read(frame, key, c.metric)
            if v is not None and not c.low <= v <= c.high:
                out[key] = v
        return out
'''
LEAVES_DOC_END = "    :func:`gpuwatch.alerts.export.to_promql`.\"\"\"\n"
OUTSIDE_PROMQL = LEAVES_DOC_END + '''
    @staticmethod
    def outside(cond, step, latch):
        name, scale = _series(cond.metric)
        return f"{name} < {_num(cond.low * scale)} or {name} > {_num(cond.high * scale)}"
'''
OUTSIDE_KIND = '''    Kind("outside", Outside, ("metric", "low", "high"), (),
         lambda f: Outside(f.metric(), f.number("low"), f.number("high")), OutsideEval, Leaves.outside,
         "the metric is below `low` or above `high`"),
    Kind("stale", Stale,'''
ALERT_KIND_EDITS = {
    "alerts/rules.py": [('Condition: TypeAlias = "Threshold |', OUTSIDE_DATACLASS)],
    "alerts/conditions.py": [("", OUTSIDE_EVAL)],
    "alerts/promql.py": [(LEAVES_DOC_END, OUTSIDE_PROMQL)],
    "alerts/kinds.py": [
        ("from gpuwatch.alerts.promql import Leaves\n", "from gpuwatch.alerts.promql import Leaves\n"
         "from gpuwatch.alerts.conditions import OutsideEval\nfrom gpuwatch.alerts.rules import Outside\n"),
        ('    Kind("stale", Stale,', OUTSIDE_KIND),
    ],
}
ALERT_KIND_SCRIPT = '''
    import contextlib, io
    from core.factories import full_snapshot
    from gpuwatch.alerts import AlertEngine, parse_rules
    from gpuwatch.alerts.export import export_prometheus
    from gpuwatch.cli.main import main

    rule = ("groups:\\n- name: g\\n  rules:\\n  - alert: OutOfBand\\n    condition: {outside: "
            "{metric: gpu.temperature_c, low: 0, high: 1}}\\n")
    rules = parse_rules(rule, "example.yml")
    engine = AlertEngine(rules)
    print("alert", sorted({t.alert.state for t in engine.evaluate(full_snapshot())}))
    print("promql", "gpuwatch_gpu_temperature_celsius < 0 or gpuwatch_gpu_temperature_celsius > 1"
          in export_prometheus(rules).text)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["rules", "kinds"])
    print("documented", "| `outside` |" in out.getvalue())
'''


def test_a_new_alert_kind_is_its_entry_dataclass_evaluator_and_promql(tmp_path: Path) -> None:
    out = worked_example(tmp_path, ALERT_KIND_EDITS, {}, ALERT_KIND_SCRIPT)
    assert out.splitlines()[:3] == ["alert ['firing']", "promql True", "documented True"]
    row, done = table()["new alert kind"], touched(ALERT_KIND_EDITS, {})
    assert done <= row and row - done == {"alerts/windows.py"}  # a windowed kind's evaluator goes there instead


# -- a pane --------------------------------------------------------------------------------------------------
PANE_NEW = {"tui/widgets/energy_pane.py": '''
    """The energy pane: what the selected GPU has drawn since the driver loaded."""

    from __future__ import annotations

    from textual.widgets import Static

    from gpuwatch.model.snapshot import GpuSample


    class EnergyPane(Static):
        DEFAULT_CSS = "EnergyPane { height: 3; width: 24; }"

        def show(self, gpu: GpuSample | None) -> None:
            joules = None if gpu is None else gpu.energy_j
            self.update("drawn " + ("-" if joules is None else f"{joules / 1e6:.3f}MJ"))
'''}
PANE_EDITS = {"tui/screen.py": [
    ("from gpuwatch.tui.widgets.diagnosis_pane import", "from gpuwatch.tui.widgets.energy_pane import EnergyPane\n"
     "from gpuwatch.tui.widgets.diagnosis_pane import"),
    ('            yield HistoryPlot(id="plot")\n', '            yield HistoryPlot(id="plot")\n'
     '            yield EnergyPane(id="energy")\n'),  # beside the GPU panel: no rows of its own
    ("            self.query_one(GpuPanel).show(gpu, snap.host, snap.time)\n",
     "            self.query_one(GpuPanel).show(gpu, snap.host, snap.time)\n"
     "            self.query_one(EnergyPane).show(gpu)\n"),
]}
PANE_SCRIPT = '''
    import asyncio
    from gpuwatch.data import bundled_recording
    from gpuwatch.sampler.sampler import Sampler
    from gpuwatch.sources.replay import ReplayProducer
    from gpuwatch.tui.app import make_app
    from gpuwatch.tui.feed import local_feed
    from gpuwatch.model.recording import load

    feed = local_feed(Sampler(ReplayProducer(bundled_recording(), speed=0)), "recording", True,
                      run_sampler=False)
    feed.prime(5)
    app = make_app(feed)
    energy = load(bundled_recording())[4].gpus[0].energy_j

    async def run():
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            screen = app.export_screenshot().replace("&#160;", " ")
            print("drawn", f"drawn {energy / 1e6:.3f}MJ" in screen)

    asyncio.run(run())
'''


def test_a_new_pane_is_its_widget_and_the_screen_that_composes_and_draws_it(tmp_path: Path) -> None:
    out = worked_example(tmp_path, PANE_EDITS, PANE_NEW, PANE_SCRIPT)
    assert out.splitlines()[:1] == ["drawn True"]
    assert touched(PANE_EDITS, PANE_NEW) == table()["new pane"]
