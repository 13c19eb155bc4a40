"""Bytes the apiserver sent in answer to LIST requests, from its /metrics endpoint.

The audit log counts requests but not their size; a LIST of every Deployment of the
namespace costs in proportion to the namespace, which a request count hides.
"""

from __future__ import annotations

import re
import ssl
import urllib.request

from restarter_cluster.cluster import Cluster

_SIZE_SUM = re.compile(r"^apiserver_response_sizes_sum\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.M)


class ApiserverMetrics:
    def __init__(self, cluster: Cluster) -> None:
        self.url = f"{cluster.server}/metrics"
        self.context = ssl.create_default_context(cafile=str(cluster.pki_dir / "ca.crt"))
        self.context.load_cert_chain(
            str(cluster.pki_dir / "admin.crt"), str(cluster.pki_dir / "admin.key")
        )

    def listed_bytes(self, resource: str) -> float:
        """Total bytes of LIST responses for ``resource`` since the apiserver started."""
        with urllib.request.urlopen(self.url, timeout=10, context=self.context) as response:
            text = response.read().decode()
        total = 0.0
        for match in _SIZE_SUM.finditer(text):
            labels = match["labels"]
            if f'resource="{resource}"' in labels and 'verb="LIST"' in labels:
                total += float(match["value"])
        return total
