"""The console summary of ``tensorscope run``: one line per finding, and one
line for findings that say the same thing of several modules at the same step."""
from __future__ import annotations

import io

from tensorscope.common.events import Finding
from tensorscope.training.runner import print_findings


def _dropout(path: str, step: int = 4) -> Finding:
    return Finding(kind="eval_mode_in_training", step=step, module=path,
                   message=f"{path} (Dropout) was in eval mode in a training forward at step "
                           f"{step}, and the optimizer stepped.")


def _summary(findings: list[Finding]) -> list[str]:
    out = io.StringIO()
    print_findings(findings, out, ["GPT2LMHeadModel"])
    return out.getvalue().splitlines()


def test_the_same_finding_on_many_modules_takes_two_lines() -> None:
    paths = ["transformer.drop"] + [f"transformer.h.{i}.mlp.dropout" for i in range(12)]
    lines = _summary([_dropout(p) for p in paths])
    assert lines[0] == "tensorscope: 13 findings"
    assert len(lines) == 3
    assert "transformer.drop (Dropout) was in eval mode" in lines[1]
    assert lines[2].strip().startswith("the same for 12 more modules: transformer.h.0.mlp.dropout, ")
    assert lines[2].endswith("transformer.h.7.mlp.dropout and 4 more")


def test_findings_that_differ_beyond_the_module_name_keep_their_lines() -> None:
    other_step = _dropout("b", step=5)
    batchnorm = Finding(kind="eval_mode_in_training", step=4, module="c",
                        message="c (BatchNorm1d) was in eval mode in a training forward at step "
                                "4, and the optimizer stepped.")
    root = Finding(kind="tiny_updates", step=4, module="", message="The optimizer barely moves.")
    lines = _summary([_dropout("a"), other_step, batchnorm, root])
    assert len(lines) == 5
    assert not any("the same for" in line for line in lines)
    assert any("tiny_updates         GPT2LMHeadModel" in line for line in lines)   # by its root
