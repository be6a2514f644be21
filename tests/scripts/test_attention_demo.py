import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_demo_prints_expected_numbers(tmp_path):
    png = tmp_path / "attn.png"
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "attention_demo.py"), "--plot", str(png)],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    assert "0.422   0.155   0.422" in out
    assert "0.016   0.867   0.117" in out
    assert "0.155   0.422   0.422" in out
    assert "row sums: [1.0, 1.0, 1.0]" in out
    # saturation: B one-hot, A and C exact ties, with and without scaling
    assert out.count("0.500   0.000   0.500") == 2 and out.count("0.000   1.000   0.000") == 2
    rows = {(int(m[1]), m[2]): float(m[3]) for m in re.finditer(r"^\s+(\d+)\s+(yes|no)\s+([\d.]+)", out, re.M)}
    assert rows[(512, "no")] > 0.9 > rows[(512, "yes")]  # unscaled saturates at large d_k
    assert abs(rows[(512, "yes")] - rows[(4, "yes")]) < 0.1  # scaled does not
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
