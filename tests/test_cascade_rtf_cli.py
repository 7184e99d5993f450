"""benchmarks/cascade_rtf.py --wav: a recorded talk instead of espeak-ng (GPU machines have none), refused clearly
when it is not what the cascade is fed."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import soundfile

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cascade_rtf.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300, check=False)


def test_a_talk_at_another_rate_or_in_stereo_is_refused_with_the_conversion(tmp_path):
    wav = tmp_path / "talk.wav"
    soundfile.write(wav, np.zeros((8000, 2), dtype="float32"), 8000)
    result = run("--wav", str(wav), "--minutes", "0.1")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "8000 Hz, 2 channel(s)" in result.stderr and "-ar 16000 -ac 1" in result.stderr


def test_a_missing_talk_is_named(tmp_path):
    result = run("--wav", str(tmp_path / "absent.wav"))
    assert result.returncode == 1 and "absent.wav: no such file" in result.stderr
