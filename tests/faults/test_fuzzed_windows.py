"""Fuzzed ``restart-at`` labels and restarter annotations, written through the apiserver.

Hypothesis makes 200 Secrets whose label and ``restarter.io/cron``, ``/timezone`` and
``/window-length`` annotations are what a user could type: near-miss times (``3:00``,
``24.00``), keywords, cron lines, zone names and typos, lengths, and arbitrary text. The
apiserver refuses some (label values are ``[A-Za-z0-9_.-]``, at most 63): those count as
refused by the apiserver. Each accepted Secret is read by one running operator (first
sight), then its data changes. Readable input must stamp its dependent; unreadable
input must get a Warning Event ``InvalidWindow`` each time and never a mark (so never a
restart); the operator must never crash. Whether input is readable is what the pure
``windows.from_source`` says (its own unit tests pin that down); this test checks the
operator on the cluster agrees with it for every input.

Examples only create objects; the checks run in bulk afterwards, so 200 examples take
seconds. Ten Deployments are the dependents, each declaring its share of the Secrets
in ``restarter.io/secrets``. Reproduce with
``RESTARTER_FAULT_SEED=<seed> pytest tests/faults/test_fuzzed_windows.py -s``.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytz
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from restarter.model import keys, windows
from restarter.model.windows import ScheduleError
from restarter.services import settings as restarter_settings
from restarter_cluster.cluster import Cluster
from tests.conftest import Operator, wait_for
from tests.faults import NO_PACING
from tests.faults.ledger import Ledger, report, seed_from_env
from tests.integration.factories import deployment, encoded, secret

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api

EXAMPLES = 200
TARGETS = 10
#: Secret names the dependents declare: more than the examples, for hypothesis' extras.
DECLARED = 400
SETTLE = 4.0
OPERATOR_ARGS = ("--timer-interval", "1", *NO_PACING)

# -- what a user could type ---------------------------------------------------------------

two_digits = st.integers(0, 99).map(lambda n: f"{n:02d}")
hours = st.one_of(st.integers(0, 30).map(str), two_digits)
minutes = st.one_of(st.integers(0, 75).map(lambda n: f"{n:02d}"), st.integers(0, 9).map(str))
times = st.builds(
    lambda hour, separator, minute: f"{hour}{separator}{minute}",
    hours,
    st.sampled_from([".", ".", ".", ":", "", "-", "_", "h", ","]),
    minutes,
)
keywords = st.sampled_from(
    ["now", "Now", "NOW", "cron", "Cron", "", "never", "daily", "3am", "03.00am", "noon"]
)
label_values = st.one_of(
    times,
    st.lists(times, min_size=2, max_size=4).map("_".join),
    keywords,
    st.from_regex(r"[A-Za-z0-9][-A-Za-z0-9_.]{0,14}[A-Za-z0-9]", fullmatch=True),
    st.text(max_size=16),
)
cron_fields = st.sampled_from(
    ["*", "0", "3", "*/5", "*/15", "0-59/7", "1-5", "MON-FRI", "mon", "JAN", "L", "5L",
     "1#2", "?", "61", "24", "32", "13", "-1", "H", "R", "1,15", "*/0", "2-1", "x"]
)  # fmt: skip
crons = st.one_of(
    st.lists(cron_fields, min_size=5, max_size=5).map(" ".join),
    st.lists(cron_fields, min_size=3, max_size=7).map(" ".join),
    st.sampled_from(
        ["0 3 * * *", "*/5 * * * *", "0 3 * * 1-5", "@daily", "0 0 29 2 *", "0 0 30 2 *",
         "0 3 31 4 *", "  0  3 * * *  ", "0 3 * * 7", "0 3 * * 8", "0 3 L * *", ""]
    ),
    st.text(max_size=20),
)  # fmt: skip
zones = st.one_of(
    st.sampled_from(pytz.all_timezones),
    st.sampled_from(
        ["utc", "Utc", "UTC+2", "GMT+2", "CET", "Europe/Warsw", "europe/warsaw", "Local",
         "", " UTC", "Mars/Olympus", "America/New York", "../etc/passwd", "Etc/GMT-14"]
    ),
    st.text(max_size=20),
)  # fmt: skip
lengths = st.one_of(
    st.builds(
        lambda h, m, s: f"{h}{m}{s}",
        st.sampled_from(["", "0h", "1h", "2h", "24h", "25h", "99999h"]),
        st.sampled_from(["", "0m", "1m", "30m", "90m", "1440m"]),
        st.sampled_from(["", "1s", "2s", "3s", "45s", "86400s"]),
    ),
    st.sampled_from(["1d", "1.5h", "-1h", "1H", "60", "h", "1h 30m", "PT1H", " 1h"]),
    st.text(max_size=10),
)
annotations = st.fixed_dictionaries(
    {}, optional={keys.CRON: crons, keys.TIMEZONE: zones, keys.WINDOW_LENGTH: lengths}
)
cron_requests = st.tuples(st.just("cron"), st.fixed_dictionaries({keys.CRON: crons}))
# Mostly what a careful user types, so the stamping and timer paths see fuzzed windows too.
daily = st.builds(lambda h, m: f"{h:02d}.{m:02d}", st.integers(0, 23), st.integers(0, 59))
careful_requests = st.tuples(
    st.one_of(daily, st.lists(daily, min_size=2, max_size=3).map("_".join), st.just("now")),
    st.fixed_dictionaries(
        {},
        optional={
            keys.TIMEZONE: st.sampled_from(pytz.all_timezones),
            keys.WINDOW_LENGTH: st.sampled_from(["3s", "30m", "1h", "90m", "2h30m", "24h"]),
        },
    ),
)
requests = st.one_of(st.tuples(label_values, annotations), cron_requests, careful_requests)


@dataclass
class Example:
    name: str
    label: str
    annotations: dict[str, str]
    readable: bool
    problem: str = ""


def readable(label: str, notes: dict[str, str], options: Any) -> tuple[bool, str]:
    """What the operator's own window parsing says about this input."""
    metadata = {"labels": {keys.RESTART_AT_LABEL: label}, "annotations": notes}
    try:
        windows.from_source(
            metadata, options.timezone, options.window_length, options.min_window_length
        )
    except ScheduleError as error:
        return False, str(error)
    return True, ""


def name_of(index: int) -> str:
    return f"fuzz-{index:03d}"


def target_of(index: int) -> str:
    return f"target-{index % TARGETS}"


def test_fuzzed_windows_never_crash_warn_when_unreadable_and_never_restart_for_them(
    cluster: Cluster,
    api_client: kubernetes.client.ApiClient,
    core: Core,
    apps: Apps,
    namespace: str,
    tmp_path: Path,
) -> None:
    fuzz_seed = seed_from_env()
    options = restarter_settings.build(list(OPERATOR_ARGS), {})
    for target in range(TARGETS):
        declared = ",".join(name_of(i) for i in range(target, DECLARED, TARGETS))
        body = deployment(
            f"target-{target}", replicas=0, annotations={keys.DEPENDS_ON_SECRETS: declared}
        )
        apps.create_namespaced_deployment(namespace, body)
    args = ["--namespace", namespace, *OPERATOR_ARGS]
    accepted: list[Example] = []
    refused = Counter[str]()
    numbers = itertools.count()
    started = time.monotonic()

    with Ledger(api_client, namespace) as ledger:
        running = Operator(cluster, tmp_path / "operator.log", args).start()
        try:

            @seed(fuzz_seed)
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=[HealthCheck.too_slow],
            )
            @given(request=requests)
            def write(request: tuple[str, dict[str, str]]) -> None:
                label, notes = request
                name = name_of(next(numbers))
                body = secret(name, {"password": "first"}, label, dict(notes))
                try:
                    core.create_namespaced_secret(namespace, body)
                except kubernetes.client.exceptions.ApiException as error:
                    assert error.status == 422, (error.status, label, notes)
                    refused["label" if "labels" in str(error.body) else "other"] += 1
                    return
                ok, problem = readable(label, dict(notes), options)
                accepted.append(Example(name, label, dict(notes), ok, problem))

            write()
            written = time.monotonic() - started

            # First sight of every Secret: its checksum recorded, readable or not.
            def checksums() -> dict[str, str | None]:
                found = core.list_namespaced_secret(namespace).items
                return {
                    s.metadata.name: (s.metadata.annotations or {}).get(keys.CHECKSUM)
                    for s in found
                }

            wait_for(
                lambda: all(checksums().get(example.name) for example in accepted),
                120,
                interval=1.0,
                message="every fuzzed Secret seen once",
            )
            first_seen = checksums()
            # The first sight's InvalidWindow Events go through kopf's queue and can trail
            # the checksums: counted once each unreadable Secret shows its own.
            wait_for(
                lambda: all(warnings(core, namespace)[e.name] for e in accepted if not e.readable),
                120,
                interval=1.0,
                message="the first sight's InvalidWindow Events",
            )
            warnings_before = warnings(core, namespace)
            for example in accepted:
                core.patch_namespaced_secret(
                    example.name, namespace, {"data": encoded({"password": "second"})}
                )

            def handled() -> bool:
                now_checksums, now_warnings = checksums(), warnings(core, namespace)
                return all(
                    now_checksums.get(e.name) != first_seen[e.name]
                    if e.readable
                    else now_warnings[e.name] > warnings_before[e.name]
                    for e in accepted
                )

            wait_for(handled, 120, interval=1.0, message="every change handled")
            time.sleep(SETTLE)
            alive = running.process is not None and running.process.poll() is None
        finally:
            running.stop()
            log = running.log()

    warnings_after = warnings(core, namespace)
    restarted_messages = [
        event.message
        for event in core.list_namespaced_event(namespace).items
        if event.reason == "Restarted"
    ]
    readable_ones = [e for e in accepted if e.readable]
    unreadable_ones = [e for e in accepted if not e.readable]
    marked_unreadable = [
        e.name
        for e in unreadable_ones
        if any(
            ledger.marked(f"target-{t}", keys.pending_key("secret", e.name)) for t in range(TARGETS)
        )
        or any(keys.source_token("secret", e.name) in message for message in restarted_messages)
    ]
    unstamped_readable = [
        e.name
        for e in readable_ones
        if not ledger.marked(target_of(int(e.name[-3:])), keys.pending_key("secret", e.name))
    ]
    crashes = log.count("failed with an exception") + log.count("Traceback")
    report(
        "fuzzed windows",
        {
            "seed": fuzz_seed,
            "examples": len(accepted) + sum(refused.values()),
            "refused_by_apiserver": dict(refused),
            "accepted": len(accepted),
            "readable": len(readable_ones),
            "unreadable": len(unreadable_ones),
            "invalid_window_events": sum(warnings_after[e.name] for e in unreadable_ones),
            "readable_stamped": len(readable_ones) - len(unstamped_readable),
            "restarts_seen": sum(len(ledger.restarts_of(f"target-{t}")) for t in range(TARGETS)),
            "restarts_for_unreadable": len(marked_unreadable),
            "crashes": crashes,
            "seconds_writing": round(written, 1),
        },
    )
    assert alive, log[-3000:]
    assert crashes == 0, log[-5000:]
    assert not marked_unreadable, [e for e in unreadable_ones if e.name in marked_unreadable]
    assert not unstamped_readable, [e for e in readable_ones if e.name in unstamped_readable]
    assert all(warnings_after[e.name] >= 2 for e in unreadable_ones)  # first sight and change
    assert not any(warnings_after[e.name] for e in readable_ones)


def warnings(core: Core, namespace: str) -> Counter[str]:
    """Warning Events with reason InvalidWindow, per Secret name."""
    counts: Counter[str] = Counter()
    for event in core.list_namespaced_event(namespace).items:
        if (
            event.reason == "InvalidWindow"
            and event.type == "Warning"
            and event.involved_object.kind == "Secret"
        ):
            counts[event.involved_object.name] += event.count or 1
    return counts
