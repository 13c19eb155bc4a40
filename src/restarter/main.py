"""``restarter``: load settings, build the handlers, run kopf; or run a subcommand (``plan``,
``release-finalizers``)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import kopf

from restarter.commands import plan, release_finalizers, release_plan, resume
from restarter.model import keys
from restarter.model.kinds import WORKLOAD_APIS, WORKLOAD_KINDS
from restarter.operator.handlers import build_registry
from restarter.operator.late_kinds import kopf_insights
from restarter.operator.no_diffs import NoDiffBase
from restarter.services import leadership, logs, metrics, notifications
from restarter.services import settings as settings_module
from restarter.services.kube.api import Api
from restarter.services.kube.connecting import CONNECT_TIMEOUT, load_client
from restarter.services.settings import Settings, SettingsError

log = logging.getLogger(__name__)

#: The subcommands (the first word only), as ``restarter --help`` lists them.
COMMANDS = (
    (plan.COMMAND, plan.DESCRIPTION),
    (release_plan.COMMAND, f"{release_plan.DESCRIPTION} Helm's pre-delete hook runs it."),
    (resume.COMMAND, resume.DESCRIPTION),
)


#: kopf's Event-posting workers at once (each one a connection to the apiserver).
POSTING_WORKERS = 8


def kopf_settings(settings: Settings) -> kopf.OperatorSettings:
    """kopf's settings: server-side label selectors, our finalizer. kopf watches no source
    (restarter's own metadata watch hands them on one at a time)."""
    operator = kopf.OperatorSettings()
    # kopf sees only pending workloads (its timers, finalizer and per-object memory);
    # who uses which source comes from restarter's own reference map instead.
    for plural in WORKLOAD_KINDS:
        group, _ = WORKLOAD_APIS[plural]
        operator.watching.label_selectors[group, plural] = keys.PENDING_LABEL
    operator.watching.chunk_size = 500
    # Only built-in resources in exact namespaces: no need to watch CRDs or namespaces,
    # so RBAC needs no access to either.
    operator.scanning.disabled = True
    operator.persistence.finalizer = keys.FINALIZER
    operator.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=keys.KOPF_PREFIX)
    # No change handlers: no essence built (two deep copies of every body), none stored.
    operator.persistence.diffbase_storage = NoDiffBase()
    operator.posting.reporting_component = "restarter"
    operator.posting.level = logging.INFO
    # kopf posts each object's Events from a worker of its own, each on a TLS connection of
    # its own (its aiohttp connector has no limit), and every such connection holds a
    # 256 KiB read buffer: unbounded, a fan-out stamping 10 000 workloads opened hundreds
    # at once (214 MiB of buffers at the peak, memray). A few workers post fast enough.
    operator.posting.worker_limit = POSTING_WORKERS
    # Threads for sync handlers and, through the default executor, for the blocking calls
    # of the async ones (handlers.share_threads): restarts and stamps in parallel.
    operator.execution.max_workers = 16
    # kopf's own requests (aiohttp). Its default is 300 s for a whole request and no limit
    # on connecting: a request on a connection that died silently would wait 5 min. 30 s
    # covers API Priority and Fairness' longest queueing (15 s) and a page of a list;
    # aiohttp closes connections idle over 15 s, which keeps such deaths rare.
    operator.networking.connect_timeout = CONNECT_TIMEOUT
    operator.networking.request_timeout = 30
    # Its watches: the apiserver ends each after 5 min (as restarter's own, instead of a
    # random 30 to 60 min), and kopf gives one up 30 s after that if its end never came.
    # A watch silent for longer than kopf's inactivity_timeout (70 s; bookmarks come every
    # minute) is opened again, which is how a dead one is noticed.
    operator.watching.connect_timeout = CONNECT_TIMEOUT
    operator.watching.server_timeout = 300
    operator.watching.client_timeout = 330
    return operator


def _selected(settings: Settings) -> str:
    if settings.namespace_selector:
        return f"those matching {settings.namespace_selector!r}"
    return "all"


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    # A subcommand only as the first word: ``restarter --timezone X`` still runs the operator.
    if arguments[:1] == [plan.COMMAND]:
        return plan.main(arguments[1:])
    if arguments[:1] == [release_plan.COMMAND]:
        return release_finalizers.main(arguments[1:])
    if arguments[:1] == [resume.COMMAND]:
        return resume.main(arguments[1:])
    try:
        settings = settings_module.build(arguments, commands=COMMANDS)
        # Before the URLs are checked: apprise's lines may name them.
        logs.configure(settings.log_format, settings.log_level)
        if settings.notify_urls:
            notifications.check_urls(settings.notify_urls)
    except (SettingsError, notifications.NotifyError) as error:
        print(f"restarter: {error}", file=sys.stderr)
        return 2
    limits = settings.pacing
    log.info(
        f"starting: timezone {settings.timezone}, window length {settings.window_length}, "
        f"timer every {settings.timer_interval:g}s, namespaces "
        f"{', '.join(settings.namespaces) or _selected(settings)}; pacing: "
        f"{limits.max_in_flight or 'no limit'} in flight, "
        f"{limits.max_per_minute or 'no limit'} per minute, "
        f"rollout timeout {settings.rollout_timeout}"
    )
    client = load_client()
    if settings.metrics_port:
        metrics.serve(settings.metrics_port)
    if settings.leader_election:
        leadership.lead(settings.lease_namespace, settings.lease_name, settings.liveness_endpoint)
    else:
        metrics.LEADER.set(1)
    api = Api(client)
    # kopf's view of the resources it serves: a kind whose CRD appears later joins it.
    insights = kopf_insights()
    kopf.run(
        registry=build_registry(settings, api, insights),
        insights=insights,
        settings=kopf_settings(settings),
        standalone=True,
        clusterwide=not settings.namespaces,
        namespaces=settings.namespaces,
        liveness_endpoint=settings.liveness_endpoint,
    )
    return 0
