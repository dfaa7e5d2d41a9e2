"""Value tracing from Python: kiln.ValueTrace and prog.compile(trace=...)."""

import json

import kiln
import numpy as np
import pytest

LOG = """\
input  x : f32[3]
output y : f32[3]
y[i] = log(x[i])
"""


def test_trace_names_the_statement_and_its_values(device, tmp_path, capfd):
    prog = kiln.Program.from_text(LOG, "log.kiln")
    with kiln.ValueTrace.start() as trace:
        run = prog.compile(device=device, trace=trace)
        print("a line of the test's own")
        out = run(x=np.array([1, 0, 2], np.float32))
        assert out["y"][1] == -np.inf
        lines = [json.loads(line) for line in trace.json_lines().splitlines()]
        trace.write(str(tmp_path / "values.jsonl"))
        assert trace.run_count == 1
    assert lines[0]["kiln_value_trace"] == 1
    entry = lines[1]["entries"][0]
    assert (entry["file"], entry["line"], entry["text"]) == ("log.kiln", 3, "y[i] = log(x[i])")
    assert entry["lines"][1] == {"indices": {"i": 1}, "reads": [{"ref": "x[i]", "value": 0}], "value": "-inf"}
    written = [json.loads(line) for line in (tmp_path / "values.jsonl").read_text().splitlines()]
    assert written == lines
    assert "a line of the test's own" in capfd.readouterr().out


def test_one_trace_at_a_time_and_closed_means_closed():
    with kiln.ValueTrace.start() as trace:
        with pytest.raises(kiln.Error, match="already"):
            kiln.ValueTrace.start()
    trace.close()  # idempotent
    with pytest.raises(TypeError):
        kiln.ValueTrace()
