"""release-finalizers: which patch frees a workload, and which options the hook may pass."""

from __future__ import annotations

import datetime as dt

import pytest

from restarter.commands.release_plan import (
    ReleaseOptions,
    ReleaseOptionsError,
    parse_options,
)
from restarter.main import main
from restarter.model import keys
from restarter.model.finalizers import release_patch
from restarter.model.kinds import WORKLOAD_KINDS

OURS = keys.FINALIZER
OPERATOR = ["--operator-namespace", "restarter-system", "--operator-deployment", "restarter"]


@pytest.mark.parametrize("finalizers", [None, [], ["other.io/keep"], ["restarter.io/finalizerx"]])
def test_release_patch_is_none_when_our_finalizer_is_absent(finalizers: list[str] | None) -> None:
    assert release_patch(finalizers, OURS) is None


@pytest.mark.parametrize(
    ("finalizers", "remaining"),
    [
        ([OURS], []),
        ([OURS, "other.io/keep"], ["other.io/keep"]),
        (["a.io/x", OURS, "b.io/y"], ["a.io/x", "b.io/y"]),
        ([OURS, "a.io/x", OURS], ["a.io/x"]),
    ],
)
def test_release_patch_removes_only_ours_and_tests_the_list_it_read(
    finalizers: list[str], remaining: list[str]
) -> None:
    assert release_patch(finalizers, OURS) == [
        {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
        {"op": "replace", "path": "/metadata/finalizers", "value": remaining},
    ]


def test_release_patch_never_touches_annotations_so_marks_stay() -> None:
    patch = release_patch([OURS], OURS) or []
    assert {op["path"] for op in patch} == {"/metadata/finalizers"}


def test_every_workload_kind_is_released() -> None:
    # The kinds FinalizerReleaser lists, in its order, as its report names them.
    assert [kind.lower() for kind in WORKLOAD_KINDS.values()] == [
        "deployment",
        "statefulset",
        "daemonset",
        "rollout",
    ]


def test_options_need_only_the_operator_and_default_to_all_namespaces_and_60s() -> None:
    assert parse_options(OPERATOR) == ReleaseOptions(
        operator_namespace="restarter-system",
        operator_deployment="restarter",
        namespaces=(),
        timeout=dt.timedelta(seconds=60),
    )


def test_options_keep_namespaces_in_order_without_duplicates() -> None:
    options = parse_options([*OPERATOR, "-n", "shop", "--namespace", "billing", "-n", "shop"])
    assert options.namespaces == ("shop", "billing")


@pytest.mark.parametrize(
    ("text", "seconds"), [("60s", 60), ("2m", 120), ("1m30s", 90), ("1h", 3600)]
)
def test_options_read_the_timeout_like_a_window_length(text: str, seconds: int) -> None:
    assert parse_options([*OPERATOR, "--timeout", text]).timeout == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["60", "0s", "-5s", "soon", "25h"])
def test_options_refuse_a_malformed_timeout_naming_it(text: str) -> None:
    with pytest.raises(ReleaseOptionsError, match=f"timeout '{text}'"):
        parse_options([*OPERATOR, f"--timeout={text}"])


@pytest.mark.parametrize("missing", ["--operator-namespace", "--operator-deployment"])
def test_options_require_the_operator_deployment(
    missing: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = list(OPERATOR)
    del argv[argv.index(missing) : argv.index(missing) + 2]
    with pytest.raises(SystemExit) as exit_info:
        parse_options(argv)
    assert exit_info.value.code == 2
    assert missing in capsys.readouterr().err


def test_the_subcommand_is_dispatched_before_operator_settings_are_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # "--timeout" is no operator flag: the subcommand's own parser must refuse its value.
    assert main(["release-finalizers", *OPERATOR, "--timeout", "never"]) == 2
    assert "restarter release-finalizers: timeout 'never'" in capsys.readouterr().err


def test_options_take_a_kubeconfig_and_context_as_kubectl_does() -> None:
    options = parse_options([*OPERATOR, "--kubeconfig", "/tmp/config", "--context", "staging"])
    assert (options.kubeconfig, options.context) == ("/tmp/config", "staging")
    assert (parse_options(OPERATOR).kubeconfig, parse_options(OPERATOR).context) == (None, None)
