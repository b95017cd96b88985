"""Checkpoints a PyTorch user holds: strata.torch's state_dict names the
store's checkpoint (no rows), load_state_dict accepts the store reopened at
it and refuses, naming both sides, a store elsewhere or past it; and
table_rows streams every row of a table as tensors, in bounded chunks."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (scripts/deps.sh installs python3-torch)")

import strata  # noqa: E402
import strata.torch as st  # noqa: E402

DIM = 4


def tables():
    return [strata.Table("t", dim=DIM, optimizer="adagrad", learning_rate=0.1),
            strata.Table("u", dim=2 * DIM, optimizer="sgd", learning_rate=0.1)]


def open_store(path):
    return strata.Store(str(path), tables(), use_gpu=False, device_rows_max=32,
                        dram_rows_max=48)


def step(ebc, store, worker, seed):
    rng = np.random.default_rng(seed)
    features = {}
    for t in ("t", "u"):
        keys = torch.from_numpy(rng.integers(0, 200, 40).astype(np.int64))
        features[t] = (keys, torch.arange(0, 40, 4))
    pooled = ebc(features)
    (pooled["t"].sum() + (pooled["u"] ** 2).sum()).backward()
    store.advance_clock(worker)


def test_state_dict_names_the_checkpoint_and_reopens(tmp_path):
    with open_store(tmp_path / "s") as store:
        w = store.register_worker()
        ebc = st.EmbeddingBagCollection(store, w, ["t", "u"])
        for s in range(3):
            step(ebc, store, w, s)
        state = ebc.state_dict()
        keys = np.arange(200, dtype=np.uint64)
        want = store.pull(w, "t", keys)
        # No rows in it: one entry, a small dict.
        assert list(state) == ["_extra_state"]
        named = state["_extra_state"]
        assert named["dir"] == str(tmp_path / "s") and named["clock"] == 3
        assert named["tables"] == [("t", DIM), ("u", 2 * DIM)]
        assert named["generation"] is None and named["world_size"] is None
        torch.save(state, tmp_path / "state.pt")
        step(ebc, store, w, 9)  # past the checkpoint
        with pytest.raises(ValueError, match="worker 0 at clock 3.*at clock 4"):
            ebc.load_state_dict(torch.load(tmp_path / "state.pt"))

    with open_store(tmp_path / "s") as store:
        w = store.register_worker()
        ebc = st.EmbeddingBagCollection(store, w, ["t", "u"])
        ebc.load_state_dict(torch.load(tmp_path / "state.pt"))
        np.testing.assert_array_equal(store.pull(w, "t", keys), want)

    with open_store(tmp_path / "other") as store:
        ebc = st.EmbeddingBagCollection(store, store.register_worker(), ["t", "u"])
        with pytest.raises(ValueError, match="directory .*/s; this module's store has .*/other"):
            ebc.load_state_dict(torch.load(tmp_path / "state.pt"))
        only_t = st.EmbeddingBagCollection(store, 0, ["t"])
        with pytest.raises(ValueError, match="tables"):
            only_t.load_state_dict({"_extra_state": dict(torch.load(tmp_path / "state.pt")[
                "_extra_state"], dir=str(tmp_path / "other"))})


def test_table_rows_streams_every_row_in_chunks(tmp_path):
    with open_store(tmp_path / "s") as store:
        w = store.register_worker()
        keys = np.concatenate([np.arange(100, dtype=np.uint64), [np.uint64(2**64 - 1)]])
        want = store.pull(w, "u", keys)  # 101 rows: most below T0 and T1
        store.push(w, "u", keys, np.ones_like(want))
        want = store.pull(w, "u", keys)
        got, sizes = {}, []
        for k, r in st.table_rows(store, "u", chunk_rows=16):
            assert k.dtype == torch.int64 and r.dtype == torch.float32 and r.shape[1] == 2 * DIM
            sizes.append(k.numel())
            got.update(zip(k.numpy().view(np.uint64).tolist(), r.numpy()))
        assert max(sizes) <= 16 and sum(sizes) == 101
        assert sorted(got) == sorted(keys.tolist())
        for i, k in enumerate(keys.tolist()):
            np.testing.assert_array_equal(got[k], want[i])
        # Stopping early ends the scan: the table is usable again at once.
        rows = st.table_rows(store, "u", chunk_rows=8)
        next(rows)
        rows.close()
        store.push(w, "u", keys[:3], np.ones((3, 2 * DIM), np.float32))
        assert sum(k.numel() for k, _ in st.table_rows(store, "t")) == 0
