"""Removing restarter's finalizer from every workload in some namespaces: the operator's
own clean shutdown (and a namespace leaving its selector), and ``restarter
release-finalizers`` once the operator stopped. Marks stay."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from restarter.model import keys
from restarter.model.finalizers import release_patch
from restarter.model.kinds import KINDS, WORKLOAD_KINDS
from restarter.services.kube.api import Api
from restarter.services.kube.errors import ApiError, Conflict, Forbidden, NotFound

#: A workload whose finalizers keep changing under us is retried this many times.
RELEASE_PASSES = 3
PAGE = 500


class ReleaseFailed(RuntimeError):
    """A step failed; the message names the step and the API's answer."""


def failure(step: str, error: ApiError) -> ReleaseFailed:
    return ReleaseFailed(f"{step}: {error.describe()}")


@dataclass(frozen=True)
class Carrying:
    """A workload that carries restarter's finalizer, as listed."""

    kind: str
    plural: str
    namespace: str
    name: str
    finalizers: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


class FinalizerReleaser:
    """Remove restarter's finalizer from every workload in ``namespaces`` (all: empty)."""

    def __init__(self, api: Api, namespaces: Sequence[str], report: Callable[[str], None]) -> None:
        self._api = api
        self._namespaces = tuple(namespaces)
        self._report = report

    def release_all(self) -> list[str]:
        """Remove our finalizer from every workload carrying it; return ``kind ns/name``."""
        released: list[str] = []
        for _ in range(RELEASE_PASSES):
            # Everything is listed before anything is patched: a namespace or kind we may
            # not read fails the command before it changed any workload.
            found = [
                workload
                for plural, kind in WORKLOAD_KINDS.items()
                for workload in self._carrying(kind.lower(), plural)
            ]
            changed: list[str] = []
            for workload in found:
                patch = release_patch(list(workload.finalizers), keys.FINALIZER)
                if patch is None:
                    continue
                try:
                    gone = not self._api.json_patch_workload(
                        workload.plural, workload.namespace, workload.name, patch
                    )
                except Conflict:
                    changed.append(workload.label)
                    continue
                except ApiError as error:
                    step = f"removing {keys.FINALIZER} from {workload.label}"
                    raise failure(step, error) from None
                if not gone:
                    self._report(f"released {keys.FINALIZER} from {workload.label}")
                    released.append(workload.label)
            if not changed:
                return released
        raise ReleaseFailed(
            f"the finalizers of {', '.join(changed)} changed on each of {RELEASE_PASSES} tries"
        )

    def _carrying(self, kind: str, plural: str) -> Iterator[Carrying]:
        """Every workload of ``kind`` in scope that carries our finalizer.

        Listed as metadata only (PartialObjectMetadataList), decoded to the fields read:
        the operator runs this as it stops, and a listing of 10 000 Helm-made Deployments
        as the client's model objects was its largest peak (1.6 M Python blocks for 1 000).
        A custom resource's kind (Rollouts) has none when its CRD is not installed, or
        when restarter may not list it (then it never held one).
        """
        for namespace in self._namespaces or (None,):
            where = namespace or "all namespaces"
            token: str | None = None
            while True:
                try:
                    page = self._api.list_workload_metadata(plural, namespace, token, PAGE)
                except (Forbidden, NotFound) as error:
                    if KINDS[plural].built_in:
                        raise failure(f"listing {kind}s in {where}", error) from None
                    return
                except ApiError as error:
                    raise failure(f"listing {kind}s in {where}", error) from None
                for item in page.get("items") or []:
                    metadata = item.get("metadata") or {}
                    finalizers = tuple(metadata.get("finalizers") or ())
                    if keys.FINALIZER in finalizers:
                        yield Carrying(
                            kind,
                            plural,
                            str(metadata.get("namespace") or ""),
                            str(metadata.get("name") or ""),
                            finalizers,
                        )
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    break
