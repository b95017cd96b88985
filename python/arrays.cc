// ArrayView: NumPy arrays by the buffer protocol, everything else by DLPack.
#include "arrays.h"

#include <string>
#include <utility>

namespace strata::python {
namespace {

// DLPack's device types and type codes (dlpack.h).
constexpr int32_t kDlCpu = 1;
constexpr int32_t kDlCuda = 2;
constexpr int32_t kDlCudaHost = 3;
constexpr int32_t kDlCudaManaged = 13;
constexpr uint8_t kDlInt = 0;
constexpr uint8_t kDlUInt = 1;
constexpr uint8_t kDlFloat = 2;

std::string ShapeText(int ndim, const int64_t* shape) {
  std::string s = "(";
  for (int i = 0; i < ndim; ++i) {
    s += std::to_string(shape[i]) + (ndim == 1 || i + 1 < ndim ? "," : "");
  }
  return s + ")";
}

std::string DeviceText(const DlDevice& d) {
  switch (d.device_type) {
    case kDlCpu:
      return "on the host";
    case kDlCudaHost:
      return "in page-locked host memory";
    case kDlCuda:
      return "on cuda:" + std::to_string(d.device_id);
    case kDlCudaManaged:
      return "in CUDA managed memory";
    default:
      return "on DLPack device type " + std::to_string(d.device_type);
  }
}

std::string DtypeText(const DlDataType& t) {
  const char* kind = t.code == kDlInt     ? "int"
                     : t.code == kDlUInt  ? "uint"
                     : t.code == kDlFloat ? "float"
                                          : "type code ";
  std::string s = kind;
  if (t.code > kDlFloat) s += std::to_string(t.code) + " of ";
  s += std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

// "list", "torch.Tensor": the type's qualified name, builtins bare.
std::string TypeName(const py::handle& obj) {
  const std::string module = py::str(py::type::of(obj).attr("__module__"));
  const std::string name = py::str(py::type::of(obj).attr("__name__"));
  return module == "builtins" ? name : module + "." + name;
}

std::string DescribeNumpy(const py::array& a) {
  std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  std::string s = "numpy array of " + std::string(py::str(a.dtype())) + " with shape " +
                  ShapeText(static_cast<int>(a.ndim()), shape.data());
  if (!(a.flags() & py::array::c_style)) s += ", not C-contiguous";
  if (!a.writeable()) s += ", read-only";
  return s;
}

std::string DescribeDl(const py::handle& obj, const DlTensor& t, bool contiguous) {
  std::string s = TypeName(obj) + " of " + DtypeText(t.dtype) + " with shape " +
                  ShapeText(t.ndim, t.shape) + " " + DeviceText(t.device);
  if (!contiguous) s += ", not C-contiguous";
  return s;
}

[[noreturn]] void Wrong(const char* call, const char* arg, const Want& want,
                        const std::string& got) {
  throw py::type_error(std::string(call) + ": " + arg + " must be " + Expected(want) + " (got " +
                       got + ")");
}

bool ShapeMatches(int ndim, const int64_t* shape, const Want& want) {
  if (ndim != want.ndim || (want.rows >= 0 && shape[0] != want.rows)) return false;
  return ndim == 1 || shape[1] == want.cols;
}

bool ElemMatches(const DlDataType& t, Elem elem) {
  if (t.lanes != 1) return false;
  if (elem == Elem::kKey) return (t.code == kDlInt || t.code == kDlUInt) && t.bits == 64;
  return t.code == kDlFloat && t.bits == 32;
}

// Row-major and dense (strides may be absent, and are free where a
// dimension has one element; an empty tensor holds no bytes to misplace).
bool Contiguous(const DlTensor& t) {
  if (t.strides == nullptr) return true;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) return true;
  }
  int64_t expected = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

bool PlaceMatches(const DlDevice& d, Place place) {
  if (place == Place::kHost) return d.device_type == kDlCpu || d.device_type == kDlCudaHost;
  return d.device_type == kDlCuda || d.device_type == kDlCudaManaged;
}

}  // namespace

std::string Expected(const Want& want) {
  std::string s = want.ndim == 1 ? "a 1-D C-contiguous " : "a C-contiguous ";
  s += want.elem == Elem::kKey ? "uint64 or int64" : "float32";
  s += " array";
  if (want.ndim == 2) {
    s += " of shape (" + std::to_string(want.rows) + ", " + std::to_string(want.cols) + ")";
  }
  if (want.writable) s += ", writable,";
  s += want.place == Place::kHost ? " on the host" : " in CUDA device memory";
  s += " (numpy, or a DLPack tensor such as torch's)";
  return s;
}

ArrayView::ArrayView(ArrayView&& other) noexcept
    : object_(std::move(other.object_)),
      managed_(std::exchange(other.managed_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      rows_(other.rows_) {}

ArrayView& ArrayView::operator=(ArrayView&& other) noexcept {
  if (this != &other) {
    Release();
    object_ = std::move(other.object_);
    managed_ = std::exchange(other.managed_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    rows_ = other.rows_;
  }
  return *this;
}

ArrayView::~ArrayView() { Release(); }

void ArrayView::Release() {
  if (managed_ != nullptr && managed_->deleter != nullptr) managed_->deleter(managed_);
  managed_ = nullptr;
}

ArrayView View(const char* call, const char* arg, const py::handle& obj, const Want& want,
               intptr_t stream) {
  ArrayView view;
  view.object_ = py::reinterpret_borrow<py::object>(obj);
  // NumPy first: the buffer protocol costs less than a capsule.
  if (py::isinstance<py::array>(obj)) {
    py::array a = py::reinterpret_borrow<py::array>(obj);
    const bool elem_ok = want.elem == Elem::kKey ? (a.dtype().is(py::dtype::of<uint64_t>()) ||
                                                    a.dtype().is(py::dtype::of<int64_t>()))
                                                 : a.dtype().is(py::dtype::of<float>());
    std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
    if (want.place != Place::kHost || !elem_ok ||
        !ShapeMatches(static_cast<int>(a.ndim()), shape.data(), want) ||
        !(a.flags() & py::array::c_style) || (want.writable && !a.writeable())) {
      Wrong(call, arg, want, DescribeNumpy(a));
    }
    view.data_ = want.writable ? a.mutable_data() : const_cast<void*>(a.data());
    view.rows_ = shape[0];
    return view;
  }
  if (!py::hasattr(obj, "__dlpack__")) Wrong(call, arg, want, TypeName(obj));

  // The producer's device decides whether it takes our stream.
  bool on_cuda = false;
  if (py::hasattr(obj, "__dlpack_device__")) {
    py::tuple device = obj.attr("__dlpack_device__")();
    const int type = device[0].cast<int>();
    on_cuda = type == kDlCuda || type == kDlCudaManaged;
  }
  // DLPack names the legacy default stream 1 (0 is ambiguous there).
  py::object capsule = on_cuda
                           ? obj.attr("__dlpack__")(py::arg("stream") = stream == 0 ? 1 : stream)
                           : obj.attr("__dlpack__")();
  auto* managed = static_cast<DlManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    Wrong(call, arg, want, TypeName(obj) + " whose __dlpack__ gave no DLPack capsule");
  }
  // Ours now: the capsule must not free it, and its deleter runs when the
  // view goes away.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  view.managed_ = managed;
  const DlTensor& t = managed->dl_tensor;
  const bool contiguous = Contiguous(t);
  if (!ElemMatches(t.dtype, want.elem) || !ShapeMatches(t.ndim, t.shape, want) || !contiguous ||
      !PlaceMatches(t.device, want.place)) {
    Wrong(call, arg, want, DescribeDl(obj, t, contiguous));
  }
  view.data_ = static_cast<char*>(t.data) + t.byte_offset;
  view.rows_ = t.shape[0];
  return view;
}

}  // namespace strata::python
