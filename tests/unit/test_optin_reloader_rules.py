"""Reloader's annotations read as Reloader 1.4.21's ``common.ShouldReload`` reads them:
``ignore``, ``search`` and ``match`` compared with "true" exactly, ``auto`` as Go's
strconv.ParseBool, every reload list entry an expression ``^entry$``, exclude lists
before reload lists, and the workload's or the pod template's annotations chosen per
source kind."""

from __future__ import annotations

from typing import Any

import pytest

from restarter.model.optin import OptIn, invalid_entries_message, opt_in, reload_expression

RELOADER = "reloader.stakater.com"


def optin_of(annotations: dict[str, str], pod: dict[str, str] | None = None) -> OptIn | None:
    return opt_in({"annotations": annotations}, {"annotations": pod or {}}, reloader=True)


def selects(
    optin: OptIn | None, kind: str, name: str, source: dict[str, str] | None = None
) -> bool:
    return optin is not None and optin.selects(kind, name, source or {})


@pytest.mark.parametrize(
    ("value", "reloads"),
    [("true", False), ("True", True), ("TRUE", True), ("1", True), (" true", True)],
)
def test_ignore_on_a_source_counts_only_as_the_exact_string_true(value: str, reloads: bool) -> None:
    optin = optin_of({f"{RELOADER}/auto": "true"})
    assert selects(optin, "secret", "db", {f"{RELOADER}/ignore": value}) is reloads


def test_ignore_on_a_workload_is_not_read_as_reloader_does_not_read_it() -> None:
    optin = optin_of({f"{RELOADER}/auto": "true", f"{RELOADER}/ignore": "true"})
    assert selects(optin, "secret", "db")


@pytest.mark.parametrize(
    ("value", "selected"),
    [
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("1", True),
        ("t", True),
        ("yes", False),
        (" true", False),
        ("false", False),
    ],
)
def test_auto_is_read_as_gos_parse_bool(value: str, selected: bool) -> None:
    assert selects(optin_of({f"{RELOADER}/auto": value}), "configmap", "c") is selected
    assert selects(optin_of({f"secret.{RELOADER}/auto": value}), "secret", "s") is selected


@pytest.mark.parametrize(("value", "selected"), [("true", True), ("True", False), ("1", False)])
def test_search_and_match_count_only_as_the_exact_string_true(value: str, selected: bool) -> None:
    search = optin_of({f"{RELOADER}/search": value})
    assert selects(search, "secret", "db", {f"{RELOADER}/match": "true"}) is selected
    search = optin_of({f"{RELOADER}/search": "true"})
    assert selects(search, "secret", "db", {f"{RELOADER}/match": value}) is selected


@pytest.mark.parametrize(
    ("entry", "name", "selected"),
    [
        ("db.prod", "db.prod", True),
        ("db.prod", "db-prod", True),  # the dot is any character, as in Reloader
        ("db.prod", "db.prod2", False),  # anchored at both ends
        ("db", "db", True),
        ("db", "db-prod", False),
        ("app-.*", "app-7", True),
        ("app-.*", "my-app-7", False),
        # ^a|b$: Go and Python alike read it as ^a or b$, so it matches more than a or b.
        ("a|b", "ax", True),
        ("a|b", "xb", True),
        ("a|b", "xa", False),
        ("(a|b)", "ax", False),
    ],
)
def test_each_reload_entry_is_the_expression_caret_entry_dollar(
    entry: str, name: str, selected: bool
) -> None:
    optin = optin_of({f"secret.{RELOADER}/reload": f"other, {entry}"})
    assert selects(optin, "secret", name) is selected
    assert optin is not None and optin.may_select("secret", name) is selected
    assert not selects(optin, "configmap", name)


def test_a_plain_name_entry_is_kept_as_a_named_source_and_an_expression_is_not() -> None:
    optin = optin_of({f"configmap.{RELOADER}/reload": "flags,db.prod"})
    assert optin is not None
    assert optin.named == frozenset({("configmap", "flags")})
    assert optin.patterns == (("configmap", "db.prod"),)
    assert reload_expression("db.prod").pattern == "^db.prod$"


def test_an_invalid_expression_is_skipped_and_kept_for_the_warning() -> None:
    optin = optin_of({f"secret.{RELOADER}/reload": "db-(,cache"})
    assert optin is not None
    assert selects(optin, "secret", "cache")
    assert not selects(optin, "secret", "db-(")
    assert [(kind, entry) for kind, entry, _ in optin.invalid] == [("secret", "db-(")]
    assert "missing )" in optin.invalid[0][2]
    alone = optin_of({f"secret.{RELOADER}/reload": "["})
    assert alone is not None and alone.invalid and not alone.may_select("secret", "[")


def test_an_exclude_list_wins_over_a_reload_list_and_names_sources_exactly() -> None:
    optin = optin_of(
        {
            f"secret.{RELOADER}/reload": "db,cache.*",
            f"secrets.exclude.{RELOADER}/reload": "db, cache-1, cache.*",
        }
    )
    assert not selects(optin, "secret", "db")
    assert not selects(optin, "secret", "cache-1")
    assert selects(optin, "secret", "cache-2")  # the exclude entry "cache.*" is a name
    assert optin is not None and not optin.may_select("secret", "db")
    # Not a dependency either: a labelled db does not restart it through the reload list.
    assert ("secret", "db") not in optin.named


def test_exclude_lists_are_read_on_the_workload_even_when_the_rest_is_on_the_pod_template() -> None:
    optin = optin_of(
        {f"secrets.exclude.{RELOADER}/reload": "db"},
        pod={f"{RELOADER}/auto": "true", f"secrets.exclude.{RELOADER}/reload": "cache"},
    )
    assert not selects(optin, "secret", "db")
    assert selects(optin, "secret", "cache")


def test_the_workload_or_the_pod_template_is_chosen_for_each_kind() -> None:
    # A ConfigMap reload list on the workload does not hide the pod template's auto from a
    # Secret's change: Reloader looks for the Secret's own annotations on the workload.
    optin = optin_of({f"configmap.{RELOADER}/reload": "flags"}, pod={f"{RELOADER}/auto": "true"})
    assert selects(optin, "secret", "db")
    assert selects(optin, "configmap", "flags")
    assert not selects(optin, "configmap", "other")
    # The workload's own auto for Secrets hides the pod template's for Secrets only.
    optin = optin_of(
        {f"secret.{RELOADER}/auto": "false"},
        pod={f"{RELOADER}/auto": "true"},
    )
    assert not selects(optin, "secret", "db")
    assert selects(optin, "configmap", "c")


def test_search_chosen_per_kind_too() -> None:
    optin = optin_of({f"secret.{RELOADER}/auto": "false"}, pod={f"{RELOADER}/search": "true"})
    match: dict[str, Any] = {f"{RELOADER}/match": "true"}
    assert not selects(optin, "secret", "db", match)
    assert selects(optin, "configmap", "c", match)


def test_the_warning_names_each_invalid_entry_its_annotation_and_why() -> None:
    optin = optin_of({f"secret.{RELOADER}/reload": "db-(,ok", f"configmap.{RELOADER}/reload": "["})
    assert optin is not None
    message = invalid_entries_message(optin)
    assert f"secret.{RELOADER}/reload entry 'db-(' is not a regular expression (missing )" in (
        message
    )
    assert f"configmap.{RELOADER}/reload entry '['" in message
    assert message.endswith("skipped, the other entries still count")
