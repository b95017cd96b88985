"""Arrays through DLPack (python/arrays.cc): PyTorch tensors used in place,
int64 keys as their 64-bit pattern, TypeErrors naming what came, and, where
a GPU is visible, a store whose T0 is on it taking CUDA tensors."""
import numpy as np
import pytest
import torch

import strata

DIM = 4
LR = 0.5


def sgd_table(name="t"):
    return strata.Table(name, dim=DIM, optimizer="sgd", learning_rate=LR, initializer="zeros")


def open_store(path, **kw):
    kw.setdefault("use_gpu", False)
    kw.setdefault("device_rows_max", 64)
    kw.setdefault("dram_rows_max", 128)
    return strata.Store(str(path), [sgd_table()], **kw)


def test_torch_tensors_are_used_in_place(tmp_path):
    with open_store(tmp_path / "s") as store:
        w = store.register_worker()
        keys = torch.tensor([5, 9, 5, -1], dtype=torch.int64)
        grads = torch.arange(4 * DIM, dtype=torch.float32).reshape(4, DIM)
        store.push(w, "t", keys, grads)
        out = torch.full((4, DIM), float("nan"))
        pointer = out.data_ptr()
        assert store.pull(w, "t", keys, out=out) is out
        assert out.data_ptr() == pointer  # written where it was, not copied back
        g = grads.numpy()
        want = -LR * np.stack([g[0] + g[2], g[1], g[0] + g[2], g[3]])
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)


def test_empty_tensors_are_empty_batches(tmp_path):
    with open_store(tmp_path / "s") as store:
        w = store.register_worker()
        keys = torch.empty(0, dtype=torch.int64)
        store.push(w, "t", keys, torch.empty(0, DIM))
        out = torch.empty(0, DIM)
        assert store.pull(w, "t", keys, out=out) is out
        assert store.stats()["pushes"] == 0


def test_int64_keys_are_their_64_bit_pattern(tmp_path):
    with open_store(tmp_path / "s") as store:
        w = store.register_worker()
        store.push(w, "t", np.array([2**64 - 1, 7], dtype=np.uint64), np.ones((2, DIM), np.float32))
        by_int64 = store.pull(w, "t", np.array([-1, 7], dtype=np.int64))
        by_tensor = store.pull(w, "t", torch.tensor([-1, 7]))
        np.testing.assert_array_equal(by_int64, np.full((2, DIM), -LR, np.float32))
        np.testing.assert_array_equal(by_tensor, by_int64)


def test_wrong_tensors_are_type_errors_that_change_nothing(tmp_path):
    with open_store(tmp_path / "s") as store:
        w = store.register_worker()
        keys = torch.tensor([1, 2, 3])
        with pytest.raises(TypeError, match=r"push: grads must be a C-contiguous float32 array "
                                            r"of shape \(3, 4\).*got torch.Tensor of float64 "
                                            r"with shape \(3,4\) on the host"):
            store.push(w, "t", keys, torch.ones(3, DIM, dtype=torch.float64))
        with pytest.raises(TypeError, match=r"not C-contiguous"):
            store.push(w, "t", keys, torch.ones(DIM, 3).t())
        with pytest.raises(TypeError, match=r"keys must be a 1-D .*got torch.Tensor of int32"):
            store.pull(w, "t", torch.tensor([1, 2, 3], dtype=torch.int32))
        with pytest.raises(TypeError, match=r"shape \(2,4\)"):
            store.pull(w, "t", keys, out=torch.empty(2, DIM))
        np.testing.assert_array_equal(store.pull(w, "t", keys), np.zeros((3, DIM), np.float32))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible to PyTorch")
def test_a_gpu_store_pulls_into_and_pushes_from_cuda_tensors(tmp_path):
    keys = torch.tensor([3, 8, 3, 2**40])
    grads = torch.randn(4, DIM)
    with open_store(tmp_path / "host") as host:
        w = host.register_worker()
        host.push(w, "t", keys, grads)
        want = host.pull(w, "t", keys)
        with pytest.raises(TypeError, match=r"out must be .* on the host.*got torch.Tensor of "
                                            r"float32 with shape \(4,4\) on cuda:0"):
            host.pull(w, "t", keys, out=torch.empty(4, DIM, device="cuda"))
    with open_store(tmp_path / "gpu", use_gpu=True) as store:
        if not store.t0_on_gpu:
            pytest.skip("the store found no GPU for T0")
        w = store.register_worker(0)
        stream = torch.cuda.current_stream().cuda_stream
        store.push(w, "t", keys, grads.cuda(), stream=stream)
        out = torch.empty(4, DIM, device="cuda")
        store.pull(w, "t", keys, out=out, stream=stream)
        torch.cuda.current_stream().synchronize()
        np.testing.assert_array_equal(out.cpu().numpy(), want)
        with pytest.raises(TypeError, match=r"pass out="):
            store.pull(w, "t", keys)
        with pytest.raises(TypeError, match=r"in CUDA device memory"):
            store.pull(w, "t", keys, out=np.empty((4, DIM), np.float32))
