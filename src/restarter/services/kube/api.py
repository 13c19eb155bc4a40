"""The client the operator and its commands build once and hand to every flow: each verb's
client in one object over one connection. A module that calls the API types its parameter
by the verb it uses (``Reader``, ``Patcher``, ``Poster``, ``Watcher``), or by ``Api`` when
it uses several."""

from __future__ import annotations

from restarter.services.kube.patching import Patcher
from restarter.services.kube.posting import Poster
from restarter.services.kube.reading import Reader
from restarter.services.kube.watching import Watcher


class Api(Reader, Patcher, Poster, Watcher):
    """Every verb's requests over one client (``connecting.load_client``)."""
