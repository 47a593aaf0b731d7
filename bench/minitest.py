"""The runner of the bench/ self-tests (test_torch_llama.py, test_torch_lm.py, ...): no pytest on the
machines, so each test file calls run(globals(), its temporary directory); and the helpers the
deployer self-tests share (row_errors, write_texts)."""
import json
import shutil
import traceback


def run(namespace, tmp):
    """Runs every callable test_* of namespace, reports each and every failure, keeps going,
    removes tmp, and returns the exit status (1 when any failed)."""
    tests = [(k, v) for k, v in namespace.items() if k.startswith("test_") and callable(v)]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
        except Exception:  # report every failure, keep going
            failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
        else:
            passed += 1
            print(f"ok   {name}", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def row_errors(got, want):
    """Per-row ||got - want|| / ||want|| (T,) of two torch tensors (T, d), in float64."""
    got, want = got.double(), want.double()
    return ((got - want).norm(dim=-1) / want.norm(dim=-1)).numpy()


def write_texts(path, texts):
    """Writes the deployer's input: one JSON record a line ({"id", "tokens", "bos"}); returns path."""
    with open(path, "w") as f:
        for rec in texts:
            f.write(json.dumps(rec) + "\n")
    return path
