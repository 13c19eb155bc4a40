"""The namespace selector: Kubernetes' label-selector grammar, and which labels match."""

from __future__ import annotations

import pytest

from restarter.model.namespaces import SelectorError, parse_selector

PAYMENTS_WEB = {"team": "payments", "tier": "web"}


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("team=payments", PAYMENTS_WEB, True),
        ("team==payments", PAYMENTS_WEB, True),
        ("team=billing", PAYMENTS_WEB, False),
        ("team=payments,tier in (web)", PAYMENTS_WEB, True),
        ("team=payments,tier in (api, batch)", PAYMENTS_WEB, False),
        ("team=payments, tier notin (api,batch)", PAYMENTS_WEB, True),
        ("tier notin (web)", PAYMENTS_WEB, False),
        # As in Kubernetes: != and notin also match a namespace without the key.
        ("team!=payments", {}, True),
        ("env notin (prod)", PAYMENTS_WEB, True),
        ("team!=payments", PAYMENTS_WEB, False),
        ("team", PAYMENTS_WEB, True),
        ("team", {}, False),
        ("!legacy", PAYMENTS_WEB, True),
        ("!team", PAYMENTS_WEB, False),
        ("example.com/owner=a", {"example.com/owner": "a"}, True),
        ("team=", {"team": ""}, True),
        ("tier in (web)", None, False),
    ],
)
def test_a_selector_matches_the_labels_kubernetes_would_match(
    selector: str, labels: dict[str, str] | None, matches: bool
) -> None:
    assert parse_selector(selector).matches(labels) is matches


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        ("", "at least one requirement"),
        (" , ", "at least one requirement"),
        ("team=a,,tier=b", "empty requirement"),
        ("team=a,", "empty requirement"),
        ("tier in (web", "never closed"),
        ("tier in web)", "closes nothing"),
        ("tier in ()", "set of values is empty"),
        ("!team=a", "'!' goes only before a bare key"),
        ("team a", "'team a' is not a requirement"),
        ("=a", "'=a' is not a requirement"),
        ("-team=a", "'-team' is not a label key"),
        ("team=-a", "'-a' is not a label value"),
        (f"team={'x' * 64}", "is not a label value"),
        (f"{'x' * 64}=a", "is not a label key"),
        ("Example.com/team=a", "is not a label key"),
        ("team>1", "is not a label key"),
    ],
)
def test_a_malformed_selector_is_refused_naming_the_part(selector: str, names: str) -> None:
    with pytest.raises(SelectorError, match=names.replace("(", r"\(").replace(")", r"\)")):
        parse_selector(selector)


def test_the_selector_keeps_its_text_for_the_logs() -> None:
    assert parse_selector(" team=a , tier in (web) ").text == "team=a , tier in (web)"
