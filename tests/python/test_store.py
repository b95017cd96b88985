"""The strata Python package against a NumPy model of the store (python/)."""
import threading

import numpy as np
import pytest

import strata

DIM = 4
LR = 0.5


def sgd_table(name="t", dim=DIM):
    # SGD from zeros: a row is -LR times the sum of every gradient pushed to it.
    return strata.Table(name, dim=dim, optimizer="sgd", learning_rate=LR, initializer="zeros")


def open_store(path, tables=None, **kw):
    kw.setdefault("use_gpu", False)
    kw.setdefault("device_rows_max", 64)
    kw.setdefault("dram_rows_max", 128)
    return strata.Store(str(path), tables or [sgd_table()], **kw)


class Model:
    def __init__(self, dim=DIM):
        self.rows = {}
        self.dim = dim

    def pull(self, keys):
        return np.stack([self.rows.get(int(k), np.zeros(self.dim, np.float32)) for k in keys])

    def push(self, keys, grads):
        # As the store: duplicates summed in batch order, then one step per key.
        sums = {}
        for k, g in zip(keys, grads):
            sums[int(k)] = sums[int(k)] + g if int(k) in sums else g.copy()
        for k, g in sums.items():
            row = self.rows.setdefault(k, np.zeros(self.dim, np.float32))
            row -= np.float32(LR) * g


def test_pull_push_match_the_model_through_all_tiers(tmp_path):
    rng = np.random.default_rng(1)
    model = Model()
    with open_store(tmp_path / "s") as store:
        w = store.register_worker()
        universe = np.array([0, 2**64 - 1] + list(range(1, 600)), dtype=np.uint64)
        for step in range(40):
            keys = rng.choice(universe, size=50).astype(np.uint64)  # repeats included
            rows = store.pull(w, "t", keys)
            assert rows.shape == (50, DIM) and rows.dtype == np.float32
            np.testing.assert_array_equal(rows, model.pull(keys))
            grads = rng.standard_normal((50, DIM)).astype(np.float32)
            store.push(w, "t", keys, grads)
            model.push(keys, grads)
            store.advance_clock(w)
        assert store.current_clock(w) == 40
        stats = store.stats()
        assert stats["pulls"] == 40 * 50
        assert stats["ssd_row_writes"] > 0  # 600 keys through 64 + 128 rows of cache
        assert stats["t0_on_gpu"] is False
        out = np.full((3, DIM), np.nan, dtype=np.float32)
        keys = universe[:3]
        assert store.pull(w, 0, keys, out=out) is out
        np.testing.assert_array_equal(out, model.pull(keys))


def test_checkpoint_and_reopen_restore_the_rows(tmp_path):
    keys = np.arange(100, dtype=np.uint64)
    grads = np.ones((100, DIM), dtype=np.float32)
    with open_store(tmp_path / "s") as store:
        w = store.register_worker()
        store.push(w, "t", keys, grads)  # rows are created on first use
        store.push(w, "t", keys, grads)
        store.advance_clock(w)
        store.checkpoint()
        store.push(w, "t", keys, grads)  # after the checkpoint: not kept
    with open_store(tmp_path / "s") as store:
        w = store.register_worker()
        assert store.current_clock(w) == 1
        np.testing.assert_array_equal(store.pull(w, "t", keys), np.full((100, DIM), -2 * LR))


def test_intents_bring_rows_up_before_the_pull(tmp_path):
    with open_store(tmp_path / "s", device_rows_max=1024, dram_rows_max=4096) as store:
        w = store.register_worker()
        keys = np.arange(200, dtype=np.uint64)
        store.intent(w, "t", keys, start=0, end=1)
        store.drain_intents()
        store.pull(w, "t", keys)
        stats = store.stats()
        assert stats["intents"] == 200
        # 200 keys of one window were pending in the planner's index.
        assert stats["intent_pairs_max"] == 200 and stats["intent_bytes_max"] > 0
        assert stats["stall_pulls"] == 0
        assert stats["prefetched_rows"] == 200


def test_wrong_arrays_are_type_errors_naming_what_was_expected(tmp_path):
    with open_store(tmp_path / "s") as store:
        w = store.register_worker()
        keys = np.arange(3, dtype=np.uint64)
        with pytest.raises(TypeError, match=r"pull: keys must be a 1-D C-contiguous uint64 or "
                                            r"int64 array on the host"):
            store.pull(w, "t", np.arange(3, dtype=np.float64))
        with pytest.raises(TypeError, match=r"shape \(3,1\)"):
            store.pull(w, "t", keys.reshape(3, 1))
        with pytest.raises(TypeError, match=r"got list"):
            store.pull(w, "t", [1, 2, 3])
        with pytest.raises(TypeError, match=r"not C-contiguous"):
            store.pull(w, "t", np.arange(6, dtype=np.uint64)[::2])
        with pytest.raises(TypeError, match=r"push: grads must be a C-contiguous float32 "
                                            r"array of shape \(3, 4\)"):
            store.push(w, "t", keys, np.zeros((3, 5), dtype=np.float32))
        with pytest.raises(TypeError, match=r"float64"):
            store.push(w, "t", keys, np.zeros((3, DIM)))
        with pytest.raises(TypeError, match=r"writable"):
            ro = np.zeros((3, DIM), dtype=np.float32)
            ro.setflags(write=False)
            store.pull(w, "t", keys, out=ro)
        with pytest.raises(TypeError, match=r"table must be a name"):
            store.pull(w, 1.5, keys)
        # Nothing was pushed by the failed calls.
        np.testing.assert_array_equal(store.pull(w, "t", keys), np.zeros((3, DIM)))


def test_failed_statuses_raise_the_exception_of_their_code(tmp_path):
    with open_store(tmp_path / "s") as store:
        w = store.register_worker()
        keys = np.arange(3, dtype=np.uint64)
        with pytest.raises(strata.NotFound, match="no table named 'nope'"):
            store.pull(w, "nope", keys)
        with pytest.raises(LookupError):
            store.pull(w, "nope", keys)
        with pytest.raises(strata.InvalidArgument, match="table 7"):
            store.pull(w, 7, keys)
        with pytest.raises(strata.InvalidArgument):
            store.intent(w, "t", keys, start=5, end=5)
        with pytest.raises(ValueError):  # InvalidArgument is a ValueError too
            store.intent(w, "t", keys, start=5, end=2)
    with pytest.raises(strata.FailedPrecondition):
        store.pull(w, "t", keys)  # closed by the with block
    with pytest.raises(strata.InvalidArgument, match="optimizer 'adamw'"):
        strata.Table("x", optimizer="adamw")
    with pytest.raises(strata.InvalidArgument, match="ssd_backend"):
        open_store(tmp_path / "b", ssd_backend="tape")
    with pytest.raises(strata.Error):
        open_store(tmp_path / "d", tables=[strata.Table("x", dim=0)])
    assert issubclass(strata.IOError, OSError)


def test_table_keywords_default_to_the_cpp_defaults():
    t = strata.Table("ads")
    assert t.name == "ads" and t.dim == 16
    assert "dim=16" in repr(t)
    with pytest.raises(TypeError):
        strata.Table("ads", 16)  # options are keywords


def test_threads_drive_their_own_workers_at_once(tmp_path):
    with open_store(tmp_path / "s", device_rows_max=256, dram_rows_max=512) as store:
        workers = [store.register_worker() for _ in range(2)]
        errors = []

        def run(i):
            try:
                keys = np.arange(i * 1000, i * 1000 + 100, dtype=np.uint64)
                grads = np.full((100, DIM), i + 1, dtype=np.float32)
                for _ in range(20):
                    store.pull(workers[i], "t", keys)
                    store.push(workers[i], "t", keys, grads)
                    store.advance_clock(workers[i])
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        for i in range(2):
            keys = np.arange(i * 1000, i * 1000 + 100, dtype=np.uint64)
            np.testing.assert_array_equal(store.pull(workers[i], "t", keys),
                                          np.full((100, DIM), -20 * LR * (i + 1)))


@pytest.mark.parametrize("backend", ["native", "rocksdb"])
def test_one_store_per_directory_and_close_frees_it(tmp_path, backend):
    path = tmp_path / "store"
    keys = np.arange(200, dtype=np.uint64)  # more rows than T0 and T1 hold
    grads = np.ones((len(keys), DIM), np.float32)
    first = open_store(path, ssd_backend=backend)
    w = first.register_worker()
    first.push(w, "t", keys, grads)
    first.checkpoint()
    for _ in range(2):
        with pytest.raises(strata.Unavailable, match="is in use"):
            open_store(path, ssd_backend=backend)
    # The first store is unharmed by the refusals: it pushes and checkpoints.
    first.push(w, "t", keys, grads)
    first.checkpoint()
    np.testing.assert_allclose(first.pull(w, "t", keys), -2 * LR * grads)
    first.close()
    with pytest.raises(strata.FailedPrecondition):
        first.advance_clock(w)
    # Consecutive `with` blocks on the directory, the closed objects still bound.
    for step in range(2):
        with open_store(path, ssd_backend=backend) as store:
            w = store.register_worker()
            np.testing.assert_allclose(store.pull(w, "t", keys), -(2 + step) * LR * grads)
            store.push(w, "t", keys, grads)
            store.checkpoint()
    assert first is not None and store is not None
