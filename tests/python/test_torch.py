"""strata.torch against PyTorch itself: the embedding-bag collection's rows
after N SGD steps equal nn.EmbeddingBag's with torch.optim.SGD on the same
data, and the loader signals each batch's intent window ahead of it."""
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
        with pytest.raises(TypeError, match="1-D int64 tensor"):
            ebc({"t": (torch.zeros(2, dtype=torch.int32), offsets)})
        with pytest.raises(ValueError, match="per-sample weights need mode 'sum'"):
            ebc({"t": (torch.zeros(2, dtype=torch.int64), offsets, torch.ones(2))})
        with pytest.raises(ValueError, match="not one of"):
            ebc({"x": (torch.zeros(2, dtype=torch.int64), offsets)})


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
