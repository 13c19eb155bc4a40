"""``restarter plan``'s flags, defaults and exit codes that need no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from restarter import main as main_module
from restarter.commands import plan
from restarter.commands.plan import PlanOptions, parse_options


def test_defaults() -> None:
    options = parse_options([], {})
    assert options == PlanOptions(
        namespace=None, all_namespaces=False, output="table", kubeconfig=None
    )


def test_flags_win_over_variables() -> None:
    options = parse_options(["-A", "-o", "json", "--hold", "freeze"], {"RESTARTER_HOLD": "x"})
    assert (options.all_namespaces, options.output, options.hold) == (True, "json", "freeze")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-n", "a", "-A"], "not allowed with argument"),
        (["-o", "yaml"], "invalid choice: 'yaml'"),
        (["--at", "soon"], "restarter plan: --at 'soon'"),
    ],
)
def test_bad_flags_exit_2_with_a_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        raise SystemExit(plan.main(argv, {}))
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_missing_kubeconfig_exits_1_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    assert main_module.main(["plan", "--kubeconfig", str(missing)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"restarter plan: cannot load the kubeconfig {missing}: ")
    assert len(captured.err.strip().splitlines()) == 1


def test_nothing_pending_renders_a_sentence_or_an_empty_list() -> None:
    assert plan.render([], "shop", "table") == "no pending workloads in namespace shop"
    assert plan.render([], None, "table") == "no pending workloads in any namespace"
    assert plan.render([], "shop", "json") == "[]"


def test_kubeconfig_and_context_as_kubectl_takes_them() -> None:
    options = parse_options(["--kubeconfig", "/tmp/config", "--context", "staging"], {})
    assert (options.kubeconfig, options.context) == ("/tmp/config", "staging")
    assert parse_options([], {}).context is None
