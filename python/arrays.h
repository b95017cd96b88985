// Arrays in and out of the strata module: NumPy arrays through the buffer
// protocol, and any object with __dlpack__ (PyTorch tensors on the CPU or a
// CUDA device, NumPy, CuPy, JAX) through DLPack, used in place (zero copy).
//
// An ArrayView borrows the memory of one argument for the length of one
// call: it keeps the Python object alive and, for DLPack, the producer's
// managed tensor, released (its deleter called) when the view goes away.
// REQUIRES: the GIL, when a view is made and when it is destroyed (a DLPack
// deleter may touch Python objects); the memory may be used without it.
//
// What a call expects is a Want: element type, shape, writability and where
// the memory must live (host, or CUDA device memory when T0 is on a GPU).
// Anything else is a TypeError naming the call, the argument, what was
// expected and what came.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::python {

namespace py = pybind11;

enum class Place {
  kHost,  // CPU memory (pageable or page-locked)
  kCuda,  // CUDA device (or managed) memory
};

enum class Elem {
  kKey,    // 64-bit integers, signed or not: a key is its 64-bit pattern
  kFloat,  // float32
};

struct Want {
  Elem elem = Elem::kFloat;
  int ndim = 2;
  int64_t rows = 0;  // shape[0]; -1: any
  int64_t cols = 0;  // shape[1] when ndim == 2
  bool writable = false;
  Place place = Place::kHost;
};

// The DLPack ABI (dlpack.h, version 0.x): what every producer's __dlpack__
// hands over in a "dltensor" capsule.
struct DlDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DlDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DlTensor {
  void* data;
  DlDevice device;
  int32_t ndim;
  DlDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DlManagedTensor {
  DlTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DlManagedTensor* self);
};

class ArrayView {
 public:
  ArrayView() = default;
  ArrayView(const ArrayView&) = delete;
  ArrayView& operator=(const ArrayView&) = delete;
  ArrayView(ArrayView&& other) noexcept;
  ArrayView& operator=(ArrayView&& other) noexcept;
  ~ArrayView();

  void* data() const { return data_; }
  int64_t rows() const { return rows_; }  // shape[0]
  // The object the memory came from (for `pull(..., out=x)` returning x).
  const py::object& object() const { return object_; }

 private:
  friend ArrayView View(const char* call, const char* arg, const py::handle& obj, const Want& want,
                        intptr_t stream);
  void Release();

  py::object object_;
  DlManagedTensor* managed_ = nullptr;
  void* data_ = nullptr;
  int64_t rows_ = 0;
};

// The memory of `obj` as `want` describes, or a TypeError. `stream` is the
// consumer's CUDA stream (a cudaStream_t as an integer; 1 is the legacy
// default stream), handed to a CUDA producer's __dlpack__ so that its
// pending work is ordered before ours.
ArrayView View(const char* call, const char* arg, const py::handle& obj, const Want& want,
               intptr_t stream);

// What `want` asks for, in words ("a C-contiguous float32 array of shape
// (3, 16), writable, in CUDA device memory").
std::string Expected(const Want& want);

}  // namespace strata::python
