"""Progress lines on stderr: nothing for short work, a line with the count and the rate for long work."""

from __future__ import annotations

import io

from minitrans.cli.progress import Progress


def test_short_work_prints_nothing_and_long_work_prints_count_total_and_rate(monkeypatch):
    clock = iter([0.0, 1.0, 12.0, 13.0, 30.0])
    monkeypatch.setattr("minitrans.cli.progress.time.perf_counter", lambda: next(clock))
    stream = io.StringIO()
    progress = Progress(total=2_000, what="translate", every_s=10.0, stream=stream)  # started at 0 s
    progress(10)  # 1 s: too soon
    assert stream.getvalue() == ""
    progress(1_190)  # 12 s: 1,200 done
    assert stream.getvalue() == "translate: 1,200/2,000 sentences (100.0 sent/s)\n"
    progress(5)  # 13 s: one interval has not passed since the last line
    progress(5)  # 30 s: 1,210 done
    assert stream.getvalue().splitlines()[-1] == "translate: 1,210/2,000 sentences (40.3 sent/s)"


def test_an_unknown_total_prints_the_count_alone(monkeypatch):
    clock = iter([0.0, 20.0])
    monkeypatch.setattr("minitrans.cli.progress.time.perf_counter", lambda: next(clock))
    stream = io.StringIO()
    progress = Progress(total=None, what="evaluate", stream=stream)
    progress(7)
    assert stream.getvalue() == "evaluate: 7 sentences (0.3 sent/s)\n"
