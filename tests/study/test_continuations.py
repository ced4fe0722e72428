"""study/continuations.py: a continuation measured as a pianist hears it, and the record read into sentences that
follow its numbers."""
import math

import numpy as np

from musictx_lite.study import continuations as C


def test_a_continuation_is_measured_after_the_prompt_only():
    prompt = np.array([[0.0, 1.0, 60, 40], [0.5, 4.0, 64, 60]])
    notes = np.vstack([prompt, [[5.0, 20.0, 48, 80], [6.0, 6.5, 67, 90], [21.0, 22.0, 72, 100],
                                [30.0, 31.0, 74, 70]]])
    m = C.measure(notes, prompt, start=5.0, seconds=20.0, p999=10.0, left_down=2)
    assert m["notes"] == 3 and m["longest_s"] == 15.0 and m["over_p999"] == 1 and m["left_down"] == 2
    assert m["most_keys_down"] == 2 and math.isclose(m["notes_per_s"], 3 / 20)
    assert m["velocity_drift"] == 100 - 50                            # the last 10 s: the note at 21 s


def summary(longest, keys, left, drift):
    stat = lambda v: {"min": v[0], "max": v[1], "mean": sum(v) / 2}
    row = {"longest_s": stat(longest), "most_keys_down": stat(keys), "left_down": stat(left),
           "velocity_drift": stat(drift), "notes_per_s": stat((10, 12)), "over_p999": stat((0, 0)),
           "logp_per_event": stat((-2.6, -2.5)), "continuations": 30}
    return row


def test_the_reading_follows_the_record():
    real = {k: v for k, v in summary((5, 9), (10, 20), (0, 0), (-8, 8)).items() if k in C.COLUMNS}
    rec = {"pieces": 10, "seeds": [0, 1, 2], "continuation_s": 30,
           "summary": {"real": real, "grammar, T=1": summary((4, 7.8), (9, 18), (0, 0), (-3, 5)),
                       "raw, T=1": summary((6, 25), (12, 30), (3, 9), (-2, 14))}}
    text = C.reading(rec)
    assert "all inside what the real performances do" in text and "inside their range" in text
    assert "cut off" not in text
    rec["limits"] = {"note_s_p999": 4.0}                          # every kept continuation reaches it
    assert "reaches the hold limit (4.0 s)" in C.reading(rec) and "cut off" in C.reading(rec)
    del rec["limits"]
    assert "no less likely than the raw sampler's own" in text                 # -2.55 against -2.55
    assert "notes, not fingers" in text and "does not slow down for a slow piece" in text
    rec["summary"]["grammar, T=1"]["most_keys_down"]["max"] = 25
    rec["summary"]["grammar, T=1"]["velocity_drift"]["max"] = 12
    text = C.reading(rec)
    assert "not all inside" in text and "partly outside their range" in text
    assert "longest note" in C.table(rec).splitlines()[0] and len(C.table(rec).splitlines()) == 4
