// ffpa_attn._C: the thin Python binding of libffpa_kernels.so. No CUDA headers, no
// libtorch: arrays arrive through DLPack or __cuda_array_interface__, errors leave as
// the package's own exception classes (ffpa_attn.errors, imported at first raise).
//
// forward(q, k, v, out, lse, causal, scale, impl="auto", stream=None, accum="fp32")
//   impl: one of ffpa::kAllImpls by its ffpa::impl_name spelling: "auto", "mma", "simt",
//   "tma", "cute", "cute_tma", and the low-precision "cute_fp8", "cute_tma_fp8", "fp8"
//   (the library picks one of the two FP8 kernels for the device), "cute_tma_fp4",
//   "fp4"; accum: "fp32" or "fp16" (the accumulator of the fp16/bf16 tensor-core paths:
//   fp16 inputs, and neither simt nor a low-precision impl, which the library checks).
//   Returns the kernel that ran ("auto" when nothing was launched; for "fp8" the FP8
//   kernel it resolved to). accum is the last keyword so that callers of the older
//   signature keep working.
//   Array protocol: objects with __dlpack__/__dlpack_device__ are read through DLPack
//   (it carries bf16 and the device); others through __cuda_array_interface__ (v2/v3).
//   Stream (the kernel runs there, asynchronously):
//     1. the `stream` argument when given (an integer cudaStream_t; 1 = legacy
//        default, 2 = per-thread default, as in the CUDA array interface);
//     2. else the `stream` entry of q's __cuda_array_interface__ (v3, e.g. CuPy's
//        current stream);
//     3. else, for a torch tensor q, torch.cuda.current_stream(q.device) (torch is
//        looked up in sys.modules, never imported or linked);
//     4. else the legacy default stream.
//   That stream is passed to __dlpack__(stream=...), so the producer orders its
//   pending work before it (the DLPack stream-exchange protocol).
//   Validation order: the impl and accum spellings, array protocol and dtypes, then shapes/strides/head dim (the
//   library's validate_forward), then "no CUDA device", then pointers/devices.
//   Keyword-only masks (forward and backward alike; ffpa::MaskArgs, kernels/ffpa/mask.h):
//   window_left=-1, window_right=-1 (key counts before / after the diagonal, -1 unbounded),
//   seqused_k=None (int32 CUDA [B]: keys past seqused_k[b] are padding, never read),
//   cu_seqlens_q=None, cu_seqlens_k=None (int32 CUDA [S + 1] prefix sums: q/k/v/out are then
//   [1, H, total, D] views of packed [total, H, D] tensors, lse [1, Hq, total_q]) with
//   max_seqlen_q=0, max_seqlen_k=0 (the longest sequence's lengths: the grid). The mma and
//   tma kernels take them; other impls refuse them.
//
// build_info(): the compiled set (head dims, dtypes, archs, impls, tma, tma_archs,
//   f16_acc, cute, cute_tma, fp8, fp8_archs, fp4, fp4_archs, cutlass, ...) without
//   touching a device; its "auto_impl" states the auto rule (the library's auto_rule();
//   auto never picks a low-precision impl).
// auto_impl(): the kernel impl="auto" runs on aligned arrays on the current device.
//
// Built with FFPA_EMULATED_DEVICE=1 against the emulated-device library
// (csrc/emulated/CMakeLists.txt), the same source is the module ffpa_attn._C_emulated:
// the emulated device's memory is the host's, so its arrays are CPU arrays (DLPack device
// type kDLCPU, read without a stream), and no stream is asked of torch (every emulated
// launch completes before it returns).
// validate_forward(q, k, v, impl="auto", accum="fp32"): forward()'s checks before the device,
//   for arrays described by (shape, strides, dtype); None or the exception, unraised (the
//   package's one validation of a forward call: ffpa_attn.launch.check asks it).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ffpa/api.h"
#include "ffpa/tolerance.h"

namespace py = pybind11;

namespace {

py::object error_class(const char* cls_name) {
  try {
    return py::module_::import("ffpa_attn.errors").attr(cls_name);
  } catch (py::error_already_set&) {
    // The module was loaded outside its package: keep the message, lose the class.
    PyErr_Clear();
    return py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
  }
}

[[noreturn]] void raise(const char* cls_name, const std::string& msg) {
  py::object cls = error_class(cls_name);
  PyErr_SetString(cls.ptr(), msg.c_str());
  throw py::error_already_set();
}

// The ffpa_attn.errors class of each library error kind (1:1).
const char* status_class(ffpa::ErrorKind kind) {
  switch (kind) {
    case ffpa::ErrorKind::kHeadDim:
      return "UnsupportedHeadDimError";
    case ffpa::ErrorKind::kDType:
      return "UnsupportedDTypeError";
    case ffpa::ErrorKind::kLayout:
      return "UnsupportedLayoutError";
    case ffpa::ErrorKind::kShape:
      return "ShapeError";
    case ffpa::ErrorKind::kImpl:
      return "UnsupportedImplError";
    case ffpa::ErrorKind::kDevice:
      return "DeviceError";
    case ffpa::ErrorKind::kOk:
      break;
  }
  return nullptr;
}

[[noreturn]] void raise_status(const ffpa::Status& st) {
  if (const char* cls = status_class(st.kind)) raise(cls, st.message);
  raise("FFPAError", "internal: unknown error kind " + std::to_string(int(st.kind)) + ": " + st.message);
}

// DLPack ABI (dlpack.h v0.x "dltensor" capsules), written from the specification.
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
#ifndef FFPA_EMULATED_DEVICE
#define FFPA_EMULATED_DEVICE 0
#endif
constexpr bool kEmulatedDevice = FFPA_EMULATED_DEVICE != 0;
constexpr int32_t kDLCPU = 1;
constexpr int32_t kDLCUDA = 2;
constexpr int32_t kDLCUDAManaged = 13;
constexpr uint8_t kDLInt = 0;
constexpr uint8_t kDLFloat = 2;
constexpr uint8_t kDLBfloat = 4;

enum class Elem { kFp16, kBf16, kFp32, kInt32, kOther };

const char* elem_name(Elem e) {
  switch (e) {
    case Elem::kFp16:
      return "fp16";
    case Elem::kBf16:
      return "bf16";
    case Elem::kFp32:
      return "fp32";
    case Elem::kInt32:
      return "int32";
    case Elem::kOther:
      break;
  }
  return "other";
}

// A parsed array; `keep` holds the DLPack capsule alive (its destructor calls the
// producer's deleter: we never take ownership, so the capsule is not renamed).
struct Array {
  void* data = nullptr;
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;  // elements
  Elem elem = Elem::kOther;
  std::string dtype_text;
  int device = -1;
  bool readonly = false;
  py::object keep;
};

bool has_attr(const py::handle& obj, const char* name) { return PyObject_HasAttrString(obj.ptr(), name) == 1; }

py::object torch_tensor_type() {
  py::dict modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("torch")) return py::none();
  py::object torch = modules["torch"];
  if (!has_attr(torch, "Tensor")) return py::none();
  return torch.attr("Tensor");
}

bool is_torch_tensor(const py::handle& obj) {
  py::object t = torch_tensor_type();
  return !t.is_none() && py::isinstance(obj, t);
}

// Stream choice, rules 2-4 of the header comment.
intptr_t default_stream(const py::handle& q) {
  if (kEmulatedDevice) return 0;
  if (has_attr(q, "__cuda_array_interface__")) {
    try {
      py::dict cai = q.attr("__cuda_array_interface__");
      if (cai.contains("stream") && !cai["stream"].is_none()) return cai["stream"].cast<intptr_t>();
    } catch (py::error_already_set&) {
      // torch raises here for bf16 or requires_grad tensors; DLPack is used then.
    }
  }
  if (is_torch_tensor(q)) {
    py::object torch = py::module_::import("sys").attr("modules")["torch"];
    py::object s = torch.attr("cuda").attr("current_stream")(q.attr("device"));
    return s.attr("cuda_stream").cast<intptr_t>();
  }
  return 0;
}

void* stream_handle(intptr_t s) {
  // CAI: 1 is the legacy default stream (our nullptr), 2 the per-thread default
  // (cudaStreamPerThread == (cudaStream_t)0x2), anything else a cudaStream_t.
  if (s == 0 || s == 1) return nullptr;
  return reinterpret_cast<void*>(s);
}

Array from_dlpack(const py::handle& obj, const char* name, intptr_t stream) {
  Array a;
  py::tuple dev = obj.attr("__dlpack_device__")();
  const int dev_type = dev[0].cast<int>();
  if (kEmulatedDevice && dev_type != kDLCPU)
    raise("DeviceError", std::string(name) + " is not in the emulated device's memory (DLPack device type " +
                             std::to_string(dev_type) + "); the emulated device takes CPU arrays: move it to the "
                             "CPU (torch: .cpu())");
  if (!kEmulatedDevice && dev_type != kDLCUDA && dev_type != kDLCUDAManaged)
    raise("DeviceError", std::string(name) + " is not in CUDA memory (DLPack device type " +
                             std::to_string(dev_type) +
                             "); move it to the GPU (torch: .cuda()), or pass NumPy arrays to ffpa_attn_func "
                             "for the CPU reference path");
  // DLPack forbids stream 0 for CUDA; 1 is the legacy default stream.
  py::object capsule = kEmulatedDevice ? obj.attr("__dlpack__")()
                                        : obj.attr("__dlpack__")(py::arg("stream") = (stream == 0 ? 1 : stream));
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    raise("UnsupportedLayoutError", std::string(name) + ".__dlpack__() did not return a 'dltensor' capsule");
  }
  const DLTensor& t = managed->dl_tensor;
  a.keep = capsule;
  a.data = static_cast<char*>(t.data) + t.byte_offset;
  a.device = t.device.device_id;
  a.shape.assign(t.shape, t.shape + t.ndim);
  if (t.strides != nullptr) {
    a.stride.assign(t.strides, t.strides + t.ndim);
  } else {
    a.stride.assign(t.ndim, 1);
    for (int i = t.ndim - 2; i >= 0; --i) a.stride[i] = a.stride[i + 1] * a.shape[i + 1];
  }
  const DLDataType dt = t.dtype;
  if (dt.lanes == 1 && dt.code == kDLFloat && dt.bits == 16) a.elem = Elem::kFp16;
  else if (dt.lanes == 1 && dt.code == kDLBfloat && dt.bits == 16) a.elem = Elem::kBf16;
  else if (dt.lanes == 1 && dt.code == kDLFloat && dt.bits == 32) a.elem = Elem::kFp32;
  else if (dt.lanes == 1 && dt.code == kDLInt && dt.bits == 32) a.elem = Elem::kInt32;
  a.dtype_text = "DLPack(code=" + std::to_string(dt.code) + ", bits=" + std::to_string(dt.bits) +
                 ", lanes=" + std::to_string(dt.lanes) + ")";
  return a;
}

Array from_cai(const py::handle& obj, const char* name) {
  Array a;
  py::dict cai = obj.attr("__cuda_array_interface__");
  const std::string typestr = cai["typestr"].cast<std::string>();
  a.dtype_text = typestr;
  int itemsize = 0;
  if (typestr == "<f2") a.elem = Elem::kFp16, itemsize = 2;
  else if (typestr == "<f4") a.elem = Elem::kFp32, itemsize = 4;
  else if (typestr == "<i4") a.elem = Elem::kInt32, itemsize = 4;
  py::tuple data = cai["data"];
  a.data = reinterpret_cast<void*>(data[0].cast<uintptr_t>());
  a.readonly = data[1].cast<bool>();
  for (auto s : py::tuple(cai["shape"])) a.shape.push_back(s.cast<int64_t>());
  if (cai.contains("mask") && !cai["mask"].is_none())
    raise("UnsupportedLayoutError", std::string(name) + " is a masked array; masks are not supported");
  if (a.elem == Elem::kOther) return a;  // dtype error is raised by the caller with context
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    for (auto s : py::tuple(cai["strides"])) {
      const int64_t bytes = s.cast<int64_t>();
      if (bytes % itemsize != 0)
        raise("UnsupportedLayoutError", std::string(name) + " has a byte stride of " + std::to_string(bytes) +
                                            ", not a multiple of the element size; make it contiguous first");
      a.stride.push_back(bytes / itemsize);
    }
  } else {
    a.stride.assign(a.shape.size(), 1);
    for (int i = static_cast<int>(a.shape.size()) - 2; i >= 0; --i) a.stride[i] = a.stride[i + 1] * a.shape[i + 1];
  }
  return a;
}

Array read_array(const py::handle& obj, const char* name, intptr_t stream) {
  if (has_attr(obj, "__dlpack__") && has_attr(obj, "__dlpack_device__")) return from_dlpack(obj, name, stream);
  if (has_attr(obj, "__cuda_array_interface__")) {
    if (kEmulatedDevice)
      raise("DeviceError", std::string(name) + " is a CUDA array (__cuda_array_interface__); the emulated device "
                                               "takes CPU arrays through DLPack: move it to the CPU");
    return from_cai(obj, name);
  }
  raise("UnsupportedArrayTypeError",
        std::string(name) + " (" + std::string(py::str(py::type::of(obj).attr("__name__"))) +
            ") exports neither DLPack nor __cuda_array_interface__; pass torch or CuPy CUDA arrays");
}

ffpa::TensorDesc to_desc(const Array& a, const char* name) {
  if (a.elem != Elem::kFp16 && a.elem != Elem::kBf16)
    raise("UnsupportedDTypeError", std::string(name) + " has dtype " +
                                       (a.elem == Elem::kOther ? a.dtype_text : elem_name(a.elem)) +
                                       "; the CUDA kernels take fp16 or bf16 (bf16 only through DLPack); "
                                       "cast with .half() / .to(torch.bfloat16)");
  if (a.shape.size() != 4)
    raise("ShapeError", std::string(name) + " must be 4-D [B, H, N, D], got " + std::to_string(a.shape.size()) +
                            " dims");
  ffpa::TensorDesc d;
  d.data = a.data;
  for (int i = 0; i < 4; ++i) {
    d.shape[i] = a.shape[i];
    d.stride[i] = a.stride[i];
  }
  d.dtype = a.elem == Elem::kFp16 ? ffpa::DType::kFp16 : ffpa::DType::kBf16;
  d.device = a.device;
  return d;
}

// Spellings come from the library's impl_name / accum_name: one table of names.
// kAllImpls is the library's one list of impls, so a new impl needs no edit here.
ffpa::Impl parse_impl(const std::string& impl) {
  std::string known;
  for (ffpa::Impl i : ffpa::kAllImpls) {
    if (impl == ffpa::impl_name(i)) return i;
    known += std::string(known.empty() ? "'" : ", '") + ffpa::impl_name(i) + "'";
  }
  raise("UnsupportedImplError", "impl='" + impl + "' is not one of " + known);
}

// The accumulator is a property of the kernel that runs, so a bad spelling is an
// UnsupportedImplError like a bad impl (the library reports the dtype and impl rules).
ffpa::Accum parse_accum(const std::string& accum) {
  std::string known;
  for (ffpa::Accum a : {ffpa::Accum::kFp32, ffpa::Accum::kFp16}) {
    if (accum == ffpa::accum_name(a)) return a;
    known += std::string(known.empty() ? "'" : ", '") + ffpa::accum_name(a) + "'";
  }
  raise("UnsupportedImplError", "accum='" + accum + "' is not one of " + known);
}

// The masks' keyword arguments (ffpa::MaskArgs): window_left / window_right (-1 unbounded),
// seqused_k (int32 [B], or [S] with varlen), cu_seqlens_q / cu_seqlens_k (int32 [S + 1]) with
// max_seqlen_q / max_seqlen_k. `keep` holds the arrays' DLPack capsules for the call.
struct MaskKw {
  int64_t window_left = -1, window_right = -1;
  py::object seqused_k, cu_seqlens_q, cu_seqlens_k;
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;
};

ffpa::IntArrayDesc read_int_array(const py::object& obj, const char* name, intptr_t s, std::vector<Array>& keep) {
  ffpa::IntArrayDesc d;
  if (obj.is_none()) return d;
  keep.push_back(read_array(obj, name, s));
  const Array& a = keep.back();
  if (a.elem != Elem::kInt32)
    raise("UnsupportedDTypeError", std::string(name) + " must be int32, got " +
                                       (a.elem == Elem::kOther ? a.dtype_text : elem_name(a.elem)) +
                                       "; cast with .to(torch.int32)");
  if (a.shape.size() != 1) raise("ShapeError", std::string(name) + " must be 1-D, got " + std::to_string(a.shape.size()) + " dims");
  d.data = static_cast<const int32_t*>(a.data);
  d.size = a.shape[0];
  d.stride = a.stride.empty() ? 1 : a.stride[0];
  d.device = a.device;
  return d;
}

ffpa::MaskArgs read_masks(const MaskKw& kw, intptr_t s, std::vector<Array>& keep) {
  ffpa::MaskArgs m;
  m.window_left = kw.window_left;
  m.window_right = kw.window_right;
  m.seqused_k = read_int_array(kw.seqused_k, "seqused_k", s, keep);
  m.cu_seqlens_q = read_int_array(kw.cu_seqlens_q, "cu_seqlens_q", s, keep);
  m.cu_seqlens_k = read_int_array(kw.cu_seqlens_k, "cu_seqlens_k", s, keep);
  m.max_seqlen_q = kw.max_seqlen_q;
  m.max_seqlen_k = kw.max_seqlen_k;
  return m;
}

// Returns the kernel that ran (ffpa::impl_name; "auto" when nothing was launched).
std::string forward(py::handle q, py::handle k, py::handle v, py::handle out, py::handle lse, bool causal,
                    double scale, const std::string& impl, py::object stream, const std::string& accum,
                    const MaskKw& kw, bool causal_top_left) {
  const ffpa::Impl impl_code = parse_impl(impl);
  const ffpa::Accum accum_code = parse_accum(accum);
  const intptr_t s = stream.is_none() ? default_stream(q) : stream.cast<intptr_t>();
  const Array aq = read_array(q, "q", s), ak = read_array(k, "k", s), av = read_array(v, "v", s);
  const Array ao = read_array(out, "out", s);
  ffpa::ForwardArgs args;
  args.q = to_desc(aq, "q");
  args.k = to_desc(ak, "k");
  args.v = to_desc(av, "v");
  args.out = to_desc(ao, "out");
  if (ao.readonly) raise("UnsupportedLayoutError", "out is read-only; pass a writable array");
  Array alse;
  if (!lse.is_none()) {
    alse = read_array(lse, "lse", s);
    if (alse.elem != Elem::kFp32)
      raise("UnsupportedDTypeError", "lse must be fp32, got " + (alse.elem == Elem::kOther ? alse.dtype_text
                                                                                            : elem_name(alse.elem)));
    if (alse.shape.size() != 3) raise("ShapeError", "lse must be 3-D [B, Hq, Nq]");
    args.lse.data = static_cast<float*>(alse.data);
    for (int i = 0; i < 3; ++i) {
      args.lse.shape[i] = alse.shape[i];
      args.lse.stride[i] = alse.stride[i];
    }
    args.lse.device = alse.device;
    if (alse.readonly) raise("UnsupportedLayoutError", "lse is read-only; pass a writable array");
  }
  const Array* all[5] = {&aq, &ak, &av, &ao, lse.is_none() ? nullptr : &alse};
  for (const Array* a : all)
    if (a != nullptr && a->device >= 0 && aq.device >= 0 && a->device != aq.device)
      raise("DeviceError", "q is on cuda:" + std::to_string(aq.device) + " but another array is on cuda:" +
                               std::to_string(a->device) + "; move them to one device");
  std::vector<Array> keep;
  args.mask = read_masks(kw, s, keep);
  args.causal = causal;
  args.causal_top_left = causal_top_left;
  args.scale = static_cast<float>(scale);
  args.impl = impl_code;
  args.accum = accum_code;
  args.stream = stream_handle(s);

  ffpa::Impl used = ffpa::Impl::kAuto;
  args.impl_used = &used;

  ffpa::Status st = ffpa::validate_forward(args);
  if (!st.ok()) raise_status(st);
  {
    // The launch is asynchronous and cheap; release the GIL for the driver calls.
    py::gil_scoped_release release;
    st = ffpa::forward(args);
  }
  if (!st.ok()) raise_status(st);
  return ffpa::impl_name(used);
}

// backward(q, k, v, out, dout, lse, dq, dk, dv, workspace, causal, causal_top_left, scale,
//          stream=None): dq, dk, dv of the forward that produced out and lse (the library's
// backward kernels; fp32 workspace of at least 2 B Hq Nq elements, any shape). Validation
// order as forward's: array protocol and dtypes, then the library's validate_backward,
// then devices.
void backward(py::handle q, py::handle k, py::handle v, py::handle out, py::handle dout, py::handle lse,
              py::handle dq, py::handle dk, py::handle dv, py::handle workspace, bool causal, bool causal_top_left,
              double scale, py::object stream, const MaskKw& kw) {
  const intptr_t s = stream.is_none() ? default_stream(q) : stream.cast<intptr_t>();
  ffpa::BackwardArgs args;
  const char* names[8] = {"q", "k", "v", "out", "dout", "dq", "dk", "dv"};
  const py::handle objs[8] = {q, k, v, out, dout, dq, dk, dv};
  ffpa::TensorDesc* descs[8] = {&args.q, &args.k, &args.v, &args.out, &args.dout, &args.dq, &args.dk, &args.dv};
  int device = -1;
  for (int i = 0; i < 8; ++i) {
    const Array a = read_array(objs[i], names[i], s);
    *descs[i] = to_desc(a, names[i]);
    if (i >= 5 && a.readonly) raise("UnsupportedLayoutError", std::string(names[i]) + " is read-only; pass a writable array");
    if (a.device >= 0 && device >= 0 && a.device != device)
      raise("DeviceError", std::string(names[i]) + " is on cuda:" + std::to_string(a.device) +
                               " but another array is on cuda:" + std::to_string(device) + "; move them to one device");
    if (a.device >= 0) device = a.device;
  }
  const Array alse = read_array(lse, "lse", s);
  if (alse.elem != Elem::kFp32 || alse.shape.size() != 3)
    raise("UnsupportedDTypeError", "lse must be the forward's fp32 [B, Hq, Nq] log-sum-exp");
  args.lse.data = static_cast<float*>(alse.data);
  for (int i = 0; i < 3; ++i) {
    args.lse.shape[i] = alse.shape[i];
    args.lse.stride[i] = alse.stride[i];
  }
  args.lse.device = alse.device;
  const Array aws = read_array(workspace, "workspace", s);
  int64_t ws_elems = 1;
  for (int64_t e : aws.shape) ws_elems *= e;
  if (aws.elem != Elem::kFp32 || aws.readonly) raise("UnsupportedDTypeError", "workspace must be a writable fp32 array");
  args.workspace = static_cast<float*>(aws.data);
  std::vector<Array> keep;
  args.mask = read_masks(kw, s, keep);
  args.causal = causal;
  args.causal_top_left = causal_top_left;
  args.scale = static_cast<float>(scale);
  args.stream = stream_handle(s);
  if (ws_elems < ffpa::backward_workspace_floats(args))
    raise("ShapeError", "workspace has " + std::to_string(ws_elems) + " elements; the backward needs " +
                            std::to_string(ffpa::backward_workspace_floats(args)) + " (2 B Hq Nq fp32)");
  ffpa::Status st = ffpa::validate_backward(args);
  if (!st.ok()) raise_status(st);
  {
    py::gil_scoped_release release;
    st = ffpa::backward(args);
  }
  if (!st.ok()) raise_status(st);
}

// --- forward validation without arrays ---------------------------------------------------
// validate_forward(q, k, v, impl="auto", accum="fp32"): the checks forward() makes before
// it touches a device (the impl and accum spellings, the dtypes, then the library's
// validate_forward: shapes, strides, head dim, the impl and accum rules of this build),
// for arrays described as (shape, strides in elements or None for C-contiguous, dtype
// "fp16" / "bf16" / any other spelling, which is refused). out is q's shape and dtype,
// C-contiguous, as the package allocates it. Returns None, or the ffpa_attn.errors
// exception forward() would raise, unraised: the package raises it, or reads it as a
// reason. Data pointers are not known here, so the 16-byte alignment of the data is
// left to forward(); the strides' alignment is checked.
Array described(const py::handle& desc, const char* name) {
  const py::tuple t = py::reinterpret_borrow<py::object>(desc).cast<py::tuple>();
  if (t.size() != 3) throw py::value_error(std::string(name) + ": expected (shape, strides, dtype)");
  Array a;
  for (auto s : py::tuple(t[0])) a.shape.push_back(s.cast<int64_t>());
  if (t[1].is_none()) {
    a.stride.assign(a.shape.size(), 1);
    for (int i = static_cast<int>(a.shape.size()) - 2; i >= 0; --i) a.stride[i] = a.stride[i + 1] * a.shape[i + 1];
  } else {
    for (auto s : py::tuple(t[1])) a.stride.push_back(s.cast<int64_t>());
    if (a.stride.size() != a.shape.size())
      throw py::value_error(std::string(name) + ": strides and shape differ in length");
  }
  a.dtype_text = t[2].cast<std::string>();
  for (Elem e : {Elem::kFp16, Elem::kBf16, Elem::kFp32})
    if (a.dtype_text == elem_name(e)) a.elem = e;
  return a;
}

py::object validate_forward(py::handle q, py::handle k, py::handle v, const std::string& impl,
                            const std::string& accum) {
  // The descriptions are read first: a malformed one is the caller's bug (ValueError /
  // TypeError), never a reason.
  const Array aq = described(q, "q"), ak = described(k, "k"), av = described(v, "v");
  try {
    ffpa::ForwardArgs args;
    args.impl = parse_impl(impl);
    args.accum = parse_accum(accum);
    args.q = to_desc(aq, "q");
    args.k = to_desc(ak, "k");
    args.v = to_desc(av, "v");
    args.out = args.q;
    for (int i = 3; i >= 0; --i) args.out.stride[i] = i == 3 ? 1 : args.out.stride[i + 1] * args.out.shape[i + 1];
    const ffpa::Status st = ffpa::validate_forward(args);
    if (st.ok()) return py::none();
    const char* cls = status_class(st.kind);
    return error_class(cls != nullptr ? cls : "FFPAError")(st.message);
  } catch (py::error_already_set& e) {
    // The errors raise() made above: handed back unraised.
    if (e.matches(error_class("FFPAError"))) return e.value();
    throw;
  }
}

py::dict build_info() {
  const ffpa::BuildInfo info = ffpa::build_info();
  py::dict d;
  d["head_dims"] = info.head_dims;
  d["dtypes"] = info.dtypes;
  d["archs"] = info.archs;
  d["fwd"] = info.fwd;
  d["tma"] = info.tma;
  d["tma_archs"] = info.tma_archs;
  d["f16_acc"] = info.f16_acc;
  d["cute"] = info.cute;
  d["cute_tma"] = info.cute_tma;
  d["fp8"] = info.fp8;
  d["fp8_archs"] = info.fp8_archs;
  d["fp4"] = info.fp4;
  d["fp4_archs"] = info.fp4_archs;
  // The backward kernels' instances ("<D>:<dtype>"); bwd: at least one was compiled.
  d["bwd_instances"] = ffpa::backward_instances();
  d["bwd"] = !ffpa::backward_instances().empty();
  // The accuracy every path is held to (ffpa/tolerance.h, the one table): the package's
  // tests, its bench and the notebooks read these.
  py::dict tolerances;
  for (const ffpa::Tolerance& t : ffpa::kTolerances) {
    py::dict row;
    row["rtol"] = t.rtol;
    row["atol"] = t.atol;
    row["lse"] = t.lse;
    row["min_cos"] = t.min_cos;
    row["max_rel_l1"] = t.max_rel_l1;
    row["max_gain_err"] = t.max_gain_err;
    tolerances[t.name] = row;
  }
  d["tolerances"] = tolerances;
  d["cutlass"] = info.cutlass_version;
  d["cuda_runtime"] = info.cuda_runtime;
  d["impls"] = info.impls;
  // The rule impl='auto' follows, in words. build_info() describes the compiled set and
  // touches no device (ffpa_attn.cuda reads it at import, which must not initialise
  // CUDA); the kernel auto picks on the current device is auto_impl() below.
  d["auto_impl"] = std::string(ffpa::auto_rule());
  // The masks the mma / tma forwards and the backward take (cmake/kernel-facts.json's
  // "masks"; forward() and backward() take them as keyword arguments).
  d["masks"] = info.masks;
  return d;
}

// The kernel impl='auto' launches on the current device for 16-byte aligned arrays
// ("tma" or "mma"): the library's own resolve_impl on a dummy aligned problem, so the
// answer can never drift from forward(). Queries the device (the TMA check).
std::string auto_impl() {
  ffpa::ForwardArgs args;  // null data, zero strides: aligned; fp32 accumulation
  return ffpa::impl_name(ffpa::resolve_impl(args));
}

}  // namespace

#if FFPA_EMULATED_DEVICE
#define FFPA_BINDING_MODULE _C_emulated
#else
#define FFPA_BINDING_MODULE _C
#endif
PYBIND11_MODULE(FFPA_BINDING_MODULE, m) {
  m.doc() = "ffpa-attn CUDA kernels (FFPA split-D forward attention); see ffpa_attn for the public API";
  m.def("build_info", &build_info, "What this extension was compiled with (head dims, dtypes, archs, paths).");
  m.def("device_count", &ffpa::device_count, "Number of CUDA devices; 0 without a driver or GPU.");
  m.def("auto_impl", &auto_impl,
        "The kernel impl='auto' runs on 16-byte aligned arrays on the current device ('tma' or 'mma').");
  m.def("validate_forward", &validate_forward, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("impl") = "auto",
        py::arg("accum") = "fp32",
        "forward()'s argument checks for arrays described as (shape, strides or None, dtype); returns None or "
        "the ffpa_attn.errors exception forward() would raise (unraised). Touches no device.");
  m.def(
      "forward",
      [](py::handle q, py::handle k, py::handle v, py::handle out, py::handle lse, bool causal, double scale,
         const std::string& impl, py::object stream, const std::string& accum, int64_t window_left,
         int64_t window_right, py::object seqused_k, py::object cu_seqlens_q, py::object cu_seqlens_k,
         int64_t max_seqlen_q, int64_t max_seqlen_k, bool causal_top_left) {
        const MaskKw kw{window_left, window_right, seqused_k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k};
        return forward(q, k, v, out, lse, causal, scale, impl, stream, accum, kw, causal_top_left);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"), py::arg("causal"), py::arg("scale"),
      py::arg("impl") = "auto", py::arg("stream") = py::none(), py::arg("accum") = "fp32", py::kw_only(),
      py::arg("window_left") = -1, py::arg("window_right") = -1, py::arg("seqused_k") = py::none(),
      py::arg("cu_seqlens_q") = py::none(), py::arg("cu_seqlens_k") = py::none(), py::arg("max_seqlen_q") = 0,
      py::arg("max_seqlen_k") = 0, py::arg("causal_top_left") = false,
        "out[...] = softmax(q k^T * scale [+ causal]) v on the caller's stream (causal bottom-right aligned, "
        "top-left with causal_top_left=True); returns the kernel that ran "
        "(impl spelling); see csrc/python/binding.cpp.");
  m.def(
      "backward",
      [](py::handle q, py::handle k, py::handle v, py::handle out, py::handle dout, py::handle lse, py::handle dq,
         py::handle dk, py::handle dv, py::handle workspace, bool causal, bool causal_top_left, double scale,
         py::object stream, int64_t window_left, int64_t window_right, py::object seqused_k, py::object cu_seqlens_q,
         py::object cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k) {
        const MaskKw kw{window_left, window_right, seqused_k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k};
        backward(q, k, v, out, dout, lse, dq, dk, dv, workspace, causal, causal_top_left, scale, stream, kw);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("dout"), py::arg("lse"), py::arg("dq"),
      py::arg("dk"), py::arg("dv"), py::arg("workspace"), py::arg("causal"), py::arg("causal_top_left"),
      py::arg("scale"), py::arg("stream") = py::none(), py::kw_only(), py::arg("window_left") = -1,
      py::arg("window_right") = -1, py::arg("seqused_k") = py::none(), py::arg("cu_seqlens_q") = py::none(),
      py::arg("cu_seqlens_k") = py::none(), py::arg("max_seqlen_q") = 0, py::arg("max_seqlen_k") = 0,
        "dq, dk, dv of softmax(q k^T * scale [+ causal]) v from the forward's out and lse, on the caller's "
        "stream; see csrc/python/binding.cpp.");
}
