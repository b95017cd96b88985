"""strata.torch against PyTorch itself: the embedding-bag collection's rows
after N SGD steps equal nn.EmbeddingBag's with torch.optim.SGD on the same
data, and the loader signals each batch's intent window ahead of it."""
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (scripts/deps.sh installs python3-torch)")

import strata  # noqa: E402
import strata.torch as st  # noqa: E402

DIM = 8
KEYS = 50
LR = 0.1


def make_batches(rng, n, batch, bag_max):
    out = []
    for _ in range(n):
        sizes = rng.integers(1, bag_max + 1, size=batch)
        keys = torch.from_numpy(rng.integers(0, KEYS, size=int(sizes.sum())).astype(np.int64))
        offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64))
        weights = torch.from_numpy(rng.random(int(sizes.sum())).astype(np.float32))
        target = torch.from_numpy(rng.standard_normal((batch, DIM)).astype(np.float32))
        out.append((keys, offsets, weights, target))
    return out


@pytest.mark.parametrize("mode,weighted", [("sum", False), ("mean", False), ("sum", True)])
def test_rows_after_sgd_steps_equal_nn_embedding_bag(tmp_path, mode, weighted):
    rng = np.random.default_rng(3)
    batches = make_batches(rng, 12, 16, 4)
    table = strata.Table("t", dim=DIM, optimizer="sgd", learning_rate=LR, initializer="zeros")
    with strata.Store(str(tmp_path / "s"), [table], use_gpu=False, device_rows_max=32,
                      dram_rows_max=64) as store:
        w = store.register_worker()
        # Both start from the same rows: random, written into the store by one push.
        start = rng.standard_normal((KEYS, DIM)).astype(np.float32)
        store.push(w, "t", np.arange(KEYS, dtype=np.uint64), -start / np.float32(LR))
        ebc = st.EmbeddingBagCollection(store, w, ["t"], mode=mode)
        reference = torch.nn.EmbeddingBag(KEYS, DIM, mode=mode)
        with torch.no_grad():
            reference.weight.copy_(torch.from_numpy(store.pull(w, "t", np.arange(KEYS, dtype=np.uint64))))
        sgd = torch.optim.SGD(reference.parameters(), lr=LR)
        for keys, offsets, weights, target in batches:
            feature = (keys, offsets, weights) if weighted else (keys, offsets)
            ours = ebc({"t": feature})["t"]
            theirs = reference(keys, offsets, per_sample_weights=weights if weighted else None)
            np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                                       rtol=1e-5, atol=1e-6)
            ((ours - target) ** 2).sum().backward()
            sgd.zero_grad()
            ((theirs - target) ** 2).sum().backward()
            sgd.step()
        rows = store.pull(w, "t", np.arange(KEYS, dtype=np.uint64))
        np.testing.assert_allclose(rows, reference.weight.detach().numpy(), rtol=1e-5, atol=1e-5)
        assert not list(ebc.parameters())  # the tables are not torch parameters


def test_dense_layers_train_around_the_collection(tmp_path):
    table = strata.Table("t", dim=DIM, optimizer="adagrad", learning_rate=0.1)
    with strata.Store(str(tmp_path / "s"), [table], use_gpu=False) as store:
        w = store.register_worker()
        ebc = st.EmbeddingBagCollection(store, w, ["t"])
        linear = torch.nn.Linear(DIM, 1)
        opt = torch.optim.SGD(linear.parameters(), lr=0.1)
        keys = torch.arange(4, dtype=torch.int64)
        offsets = torch.arange(4, dtype=torch.int64)
        labels = torch.tensor([[1.0], [0.0], [1.0], [0.0]])
        losses = []
        for _ in range(30):
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                linear(ebc({"t": (keys, offsets)})["t"]), labels)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[-1] < 0.5 * losses[0]
        assert store.stats()["pushes"] == 30 * 4


def test_bad_features_are_clear_errors(tmp_path):
    with strata.Store(str(tmp_path / "s"), [strata.Table("t", dim=DIM)], use_gpu=False) as store:
        w = store.register_worker()
        with pytest.raises(ValueError, match="no table 'u'"):
            st.EmbeddingBagCollection(store, w, ["u"])
        with pytest.raises(ValueError, match="mode"):
            st.EmbeddingBagCollection(store, w, ["t"], mode="max")
        ebc = st.EmbeddingBagCollection(store, w, ["t"], mode="mean")
        offsets = torch.zeros(1, dtype=torch.int64)
        with pytest.raises(TypeError, match="keys must be a 1-D int64 or int32 tensor"):
            ebc({"t": (torch.zeros(2, dtype=torch.float32), offsets)})
        with pytest.raises(ValueError, match="per-sample weights need mode 'sum'"):
            ebc({"t": (torch.zeros(2, dtype=torch.int64), offsets, torch.ones(2))})
        with pytest.raises(ValueError, match="not one of"):
            ebc({"x": (torch.zeros(2, dtype=torch.int64), offsets)})
        with pytest.raises(TypeError, match="one weight per key"):
            st.EmbeddingBagCollection(store, w, ["t"])(
                {"t": (torch.zeros(2, dtype=torch.int64), offsets, torch.ones(3))})
        with pytest.raises(TypeError, match="KeyedJaggedTensor"):
            ebc(torch.zeros(2, dtype=torch.int64))


def test_int32_ids_pool_and_train_as_int64(tmp_path):
    table = strata.Table("t", dim=DIM, optimizer="adagrad", learning_rate=0.1)
    keys = torch.tensor([3, 7, 7, 1, 40], dtype=torch.int64)
    offsets = torch.tensor([0, 2, 3], dtype=torch.int32)
    results = []
    for dtype in (torch.int64, torch.int32):
        with strata.Store(str(tmp_path / str(dtype)), [table], use_gpu=False) as store:
            w = store.register_worker()
            ebc = st.EmbeddingBagCollection(store, w, ["t"])
            for _ in range(3):
                ebc({"t": (keys.to(dtype), offsets)})["t"].square().sum().backward()
            results.append(store.pull(w, "t", keys.numpy()))
    np.testing.assert_array_equal(results[0], results[1])


def test_offsets_follow_include_last_offset_and_bad_ones_are_refused(tmp_path):
    with strata.Store(str(tmp_path / "s"), [strata.Table("t", dim=DIM)], use_gpu=False) as store:
        w = store.register_worker()
        keys = torch.tensor([1, 2, 3, 4, 5], dtype=torch.int64)
        starts = torch.tensor([0, 2, 2], dtype=torch.int64)  # 3 bags, the middle one empty
        with_end = torch.tensor([0, 2, 2, 5], dtype=torch.int64)
        plain = st.EmbeddingBagCollection(store, w, ["t"])
        last = st.EmbeddingBagCollection(store, w, ["t"], include_last_offset=True)
        with torch.no_grad():
            a = plain({"t": (keys, starts)})["t"]
            b = last({"t": (keys, with_end)})["t"]
        assert a.shape == b.shape == (3, DIM)
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        rows = torch.from_numpy(store.pull(w, "t", keys.numpy()))
        torch.testing.assert_close(a[2], rows[2:].sum(0))
        assert not a[1].any()
        # B+1 offsets given to the default convention: refused, not read as an extra bag.
        with pytest.raises(ValueError, match="include_last_offset=True"):
            plain({"t": (keys, with_end)})
        with pytest.raises(ValueError, match="last of offsets is the number of keys, 5"):
            last({"t": (keys, starts)})
        with pytest.raises(TypeError, match="offsets must be a 1-D int64 or int32 tensor"):
            plain({"t": (keys, starts.to(torch.float32))})
        with pytest.raises(ValueError, match="non-decreasing"):
            plain({"t": (keys, torch.tensor([0, 3, 2]))})
        with pytest.raises(ValueError, match="start at 0"):
            plain({"t": (keys, torch.tensor([1, 3]))})
        with pytest.raises(ValueError, match="the last bag would be empty"):
            plain({"t": (keys, torch.tensor([0, 6]))})
        with pytest.raises(ValueError, match="at least 2"):
            last({"t": (keys, torch.tensor([0]))})
        assert store.stats()["pushes"] == 0


def test_a_second_lookup_of_a_table_before_backward_is_refused(tmp_path):
    with strata.Store(str(tmp_path / "s"), [strata.Table("t", dim=DIM, optimizer="sgd")],
                      use_gpu=False) as store:
        w = store.register_worker()
        ebc = st.EmbeddingBagCollection(store, w, ["t"])
        keys, offsets = torch.tensor([1, 2, 3]), torch.tensor([0, 1])
        first = ebc({"t": (keys, offsets)})["t"]
        with pytest.raises(RuntimeError, match="second optimizer step"):
            ebc({"t": (keys, offsets)})
        with torch.no_grad():  # evaluation pulls are not steps
            ebc({"t": (keys, offsets)})
        first.sum().backward()
        assert store.stats()["pushes"] == 3
        # After the backward, the next step's lookup goes through.
        second = ebc({"t": (keys, offsets)})["t"]
        del second  # a graph freed without backward frees the table too
        third = ebc({"t": (keys, offsets)})["t"].sum()
        third.backward(retain_graph=True)
        with pytest.raises(RuntimeError, match="push its gradients twice"):
            third.backward()
        assert store.stats()["pushes"] == 6


class FakeStore:
    """Records what the loader calls."""

    def __init__(self, clock):
        self.clock, self.calls = clock, []

    def current_clock(self, worker):
        return self.clock

    def intent(self, worker, table, keys, start, end):
        self.calls.append(("intent", table, tuple(int(k) for k in keys), start, end))

    def advance_clock(self, worker):
        self.clock += 1
        self.calls.append(("advance", self.clock))


def test_loader_signals_each_batch_lookahead_ahead_and_advances_after_it():
    store = FakeStore(clock=10)
    batches = [np.array([b, b + 100], dtype=np.uint64) for b in range(5)]
    seen = []
    loader = st.IntentLoader(batches, store, 0, lambda b: {"t": b}, lookahead=2)
    for batch in loader:
        # While batch i trains, intents for i .. i+2 are out and none later.
        i = int(batch[0])
        signalled = [c[3] - 10 for c in store.calls if c[0] == "intent"]
        assert signalled == list(range(min(5, i + 3)))
        assert store.clock == 10 + i
        seen.append(i)
    assert seen == list(range(5))
    assert store.clock == 15
    windows = [(c[2], c[3], c[4]) for c in store.calls if c[0] == "intent"]
    assert windows == [((b, b + 100), 10 + b, 11 + b) for b in range(5)]


def test_loader_with_a_real_store_prefetches(tmp_path):
    with strata.Store(str(tmp_path / "s"), [strata.Table("t", dim=DIM)], use_gpu=False) as store:
        w = store.register_worker()
        batches = [torch.arange(b * 10, b * 10 + 10, dtype=torch.int64) for b in range(6)]
        ebc = st.EmbeddingBagCollection(store, w, ["t"])
        for keys in st.IntentLoader(batches, store, w, lambda k: {"t": k}, lookahead=3):
            ebc({"t": (keys, torch.arange(10, dtype=torch.int64))})["t"].sum().backward()
        assert store.current_clock(w) == 6
        assert store.stats()["intents"] == 60
    with pytest.raises(ValueError, match="lookahead"):
        st.IntentLoader([], store, w, lambda k: {}, lookahead=-1)


def test_strata_imports_before_torch():
    # A build with NCCL links libnccl.so.2; PyPI's torch needs its wheel's,
    # newer one, which `import strata` loads first (strata/__init__.py).
    run = subprocess.run([sys.executable, "-c", "import strata, torch, strata.torch"],
                         env=os.environ, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
